package daemon

import (
	"sort"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	"github.com/wasmplane/wasmplane/core/controller/internal/history"
	"github.com/wasmplane/wasmplane/core/controller/replicaset"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// defaultTolerations are the tolerations Kubernetes adds to every daemon pod, so that a
// node's conditions (not ready, unreachable, under pressure, cordoned) neither keep the
// pod off it nor evict it.
var defaultTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added too when the pod uses the host's network, which a node
// whose pod network is not up yet can still give it.
var hostNetworkToleration = corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// addTolerations adds the daemon tolerations spec lacks; one with the same key, operator
// and effect replaces none the user wrote.
func addTolerations(spec *corev1.PodSpec) {
	want := defaultTolerations
	if spec.HostNetwork {
		want = append(append([]corev1.Toleration(nil), want...), hostNetworkToleration)
	}
	for _, t := range want {
		found := false
		for _, have := range spec.Tolerations {
			if have.Key == t.Key && have.Operator == t.Operator && have.Effect == t.Effect {
				found = true
				break
			}
		}
		if !found {
			spec.Tolerations = append(spec.Tolerations, t)
		}
	}
}

// newPod is the pod ds runs on node: the template with the daemon tolerations, labelled
// with the revision hash, and placed by a required node affinity on the node's name that
// the scheduler then binds, as Kubernetes does (rather than setting spec.nodeName).
func newPod(ds *appsv1.DaemonSet, hash, node string) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ds.Name + "-", Namespace: ds.Namespace,
			Labels: t.Labels, Annotations: t.Annotations, Finalizers: t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(ds, controllerKind)},
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[history.HashLabel] = hash
	addTolerations(&pod.Spec)
	if node != "" {
		pinToNode(&pod.Spec, node)
	}
	return pod
}

// pinToNode replaces the required node affinity of spec with one term selecting node by
// name; the node was already checked against the template's own terms.
func pinToNode(spec *corev1.PodSpec, node string) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}}}},
	}
}

// targetNode is the node a daemon pod is (or will be) on: its nodeName once bound, else
// the node its affinity pins it to.
func targetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, r := range terms[0].MatchFields {
		if r.Key == metav1.ObjectNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// shouldRun reports whether ds wants a pod on node (shouldRun) and whether a pod already
// there may stay (shouldContinue), as Kubernetes' NodeShouldRunDaemonPod: the template's
// nodeName, node selector and required node affinity must match, and the node's taints
// be tolerated (NoSchedule and NoExecute to run, NoExecute only to stay).
func shouldRun(ds *appsv1.DaemonSet, node *corev1.Node) (run, stay bool) {
	pod := &corev1.Pod{Spec: *ds.Spec.Template.Spec.DeepCopy()}
	addTolerations(&pod.Spec)
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		return false, false
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false, false
	}
	logger := klog.Background()
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoExecute
	}, false)
	if untolerated {
		return false, false
	}
	_, untolerated = corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule
	}, false)
	return !untolerated, true
}

// isUpdated reports whether pod runs ds's current revision.
func isUpdated(pod *corev1.Pod, hash string) bool {
	return pod.Labels[history.HashLabel] == hash
}

// available reports whether pod counts as available: ready for minReadySeconds and not
// on its way out.
func available(pod *corev1.Pod, minReadySeconds int32, now metav1.Time) bool {
	return pod.DeletionTimestamp == nil && replicaset.IsPodAvailable(pod, minReadySeconds, now.Time)
}

// sortOldestFirst orders pods by creation, running before pending, then by name.
func sortOldestFirst(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if (a.Status.Phase == corev1.PodRunning) != (b.Status.Phase == corev1.PodRunning) {
			return a.Status.Phase == corev1.PodRunning
		}
		return a.Name < b.Name
	})
}
