package statefulset

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podNameRE splits a member pod's name into the StatefulSet's name and the ordinal.
var podNameRE = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// ordinalOf returns the ordinal of a pod named <set>-<ordinal>, or -1 for any other name.
func ordinalOf(setName, podName string) int {
	m := podNameRE.FindStringSubmatch(podName)
	if m == nil || m[1] != setName {
		return -1
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return -1
	}
	return n
}

func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is the PersistentVolumeClaim a pod's ordinal gets from a volumeClaimTemplate.
func claimName(set *appsv1.StatefulSet, tmpl string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", tmpl, set.Name, ordinal)
}

// startOrdinal is spec.ordinals.start, 0 by default.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// revisionFor names the revision the pod of ordinal is created at: with RollingUpdate,
// ordinals below the partition stay at the current revision; otherwise the update
// revision.
func revisionFor(set *appsv1.StatefulSet, ordinal int, current, update string) string {
	ru := set.Spec.UpdateStrategy.RollingUpdate
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil && ru.Partition != nil &&
		ordinal-startOrdinal(set) < int(*ru.Partition) {
		return current
	}
	return update
}

// newPod is the pod of ordinal built from tmpl (the template of revision rev): its
// stable name, hostname <set>-<ordinal> under the governing Service's subdomain, the
// identity labels, and a volume per claim template bound to the ordinal's claim.
func newPod(set *appsv1.StatefulSet, tmpl *corev1.PodTemplateSpec, rev string, ordinal int) *corev1.Pod {
	t := tmpl.DeepCopy()
	name := podName(set, ordinal)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: set.Namespace,
			Labels: t.Labels, Annotations: t.Annotations, Finalizers: t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	pod.Labels[history.HashLabel] = rev
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = set.Spec.ServiceName
	for _, ct := range set.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(set, ct.Name, ordinal)},
		}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == ct.Name {
				pod.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	return pod
}

// newClaims are the PersistentVolumeClaims of ordinal, labelled with the set's selector;
// with whenDeleted: Delete the StatefulSet owns them, so the garbage collector removes
// them with it.
func newClaims(set *appsv1.StatefulSet, ordinal int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, ct := range set.Spec.VolumeClaimTemplates {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name: claimName(set, ct.Name, ordinal), Namespace: set.Namespace,
				Labels: map[string]string{}, Annotations: ct.Annotations,
			},
			Spec: *ct.Spec.DeepCopy(),
		}
		for k, v := range ct.Labels {
			c.Labels[k] = v
		}
		if set.Spec.Selector != nil {
			for k, v := range set.Spec.Selector.MatchLabels {
				c.Labels[k] = v
			}
		}
		if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil && p.WhenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			ref := controllerref.NewControllerRef(set, controllerKind)
			ref.Controller = nil
			c.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		out = append(out, c)
	}
	return out
}

// deletesClaimsOnScaleDown reports whether whenScaled is Delete.
func deletesClaimsOnScaleDown(set *appsv1.StatefulSet) bool {
	p := set.Spec.PersistentVolumeClaimRetentionPolicy
	return p != nil && p.WhenScaled == appsv1.DeletePersistentVolumeClaimRetentionPolicyType
}
