package plugins

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// Names and paths of Kubernetes' ServiceAccount admission.
const (
	// DefaultServiceAccountName is the account a pod that names none runs as.
	DefaultServiceAccountName = "default"
	// ServiceAccountVolumeName prefixes the projected token volume's name.
	ServiceAccountVolumeName = "kube-api-access"
	// DefaultAPITokenMountPath is where every container finds the token, CA and namespace.
	DefaultAPITokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// TokenExpirationSeconds is the bound token's lifetime (Kubernetes'
	// WarnOnlyBoundTokenExpirationSeconds: one hour and seven seconds).
	TokenExpirationSeconds = int64(3607)
	// RootCAConfigMapName is the ConfigMap projected for the cluster CA.
	RootCAConfigMapName = "kube-root-ca.crt"
	mirrorPodAnnotation = "kubernetes.io/config.mirror"
)

// ServiceAccount is Kubernetes' ServiceAccount admission plugin for pod creates: it sets
// the default account, refuses an account that does not exist, and mounts a projected
// token volume in every container unless automounting is turned off.
//
// Deviation: a missing "default" ServiceAccount is not an error (servers started without
// the ServiceAccount controller have none); the pod is admitted as if it existed.
type ServiceAccount struct {
	// Accounts reads ServiceAccounts.
	Accounts ServiceAccountGetter
	// VolumeSuffix draws the random suffix of the token volume name; nil = 5 random
	// characters, as Kubernetes.
	VolumeSuffix func() string
}

// Name implements admission.Mutator and admission.Validator.
func (*ServiceAccount) Name() string { return "ServiceAccount" }

func (p *ServiceAccount) handles(a *admission.Attributes) bool {
	return isPod(a) && a.Operation == admission.Create
}

// Admit defaults spec.serviceAccountName and mounts the token volume.
func (p *ServiceAccount) Admit(ctx context.Context, a *admission.Attributes) error {
	if !p.handles(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	// Mirror pods are the kubelet's copy of a static pod: never mutate them.
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return p.Validate(ctx, a)
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccountName
		pod.Spec.DeprecatedServiceAccount = DefaultServiceAccountName //nolint:staticcheck // kept in sync as Kubernetes does
	}
	sa, err := p.account(ctx, a.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return forbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		p.mountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), sa.ImagePullSecrets...)
	}
	return p.Validate(ctx, a)
}

// Validate refuses pods whose ServiceAccount is missing, and mirror pods that reference
// service accounts.
func (p *ServiceAccount) Validate(ctx context.Context, a *admission.Attributes) error {
	if !p.handles(a) {
		return nil
	}
	pod, err := podOf(a)
	if err != nil {
		return err
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		if pod.Spec.ServiceAccountName != "" {
			return forbidden(a, fmt.Errorf("a mirror pod may not reference service accounts"))
		}
		for _, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					return forbidden(a, fmt.Errorf("a mirror pod may not use ServiceAccountToken volume projections"))
				}
			}
		}
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		return forbidden(a, fmt.Errorf("no service account specified for pod %s/%s", a.Namespace, pod.Name))
	}
	if _, err := p.account(ctx, a.Namespace, pod.Spec.ServiceAccountName); err != nil {
		return forbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.Namespace, pod.Spec.ServiceAccountName, err))
	}
	return nil
}

// account returns the named ServiceAccount; a missing "default" one reads as an empty
// account (see the type's deviation note).
func (p *ServiceAccount) account(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa, err := p.Accounts.GetServiceAccount(ctx, namespace, name)
	switch {
	case err == nil:
		return sa, nil
	case apierrors.IsNotFound(err) && name == DefaultServiceAccountName:
		return &corev1.ServiceAccount{}, nil
	case apierrors.IsNotFound(err):
		// Kubernetes reports the singular resource here.
		return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
	default:
		return nil, err
	}
}

// shouldAutomount: the pod's setting wins, then the account's, then true.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountToken adds the projected token volume and mounts it in every container that
// does not already mount something at the token path.
func (p *ServiceAccount) mountToken(pod *corev1.Pod) {
	volumeName := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumeName+"-") {
			volumeName = v.Name
			break
		}
	}
	hasVolume := volumeName != ""
	if !hasVolume {
		suffix := utilrand.String(5)
		if p.VolumeSuffix != nil {
			suffix = p.VolumeSuffix()
		}
		volumeName = ServiceAccountVolumeName + "-" + suffix
	}
	mount := corev1.VolumeMount{Name: volumeName, ReadOnly: true, MountPath: DefaultAPITokenMountPath}
	needed := false
	addMount := func(cs []corev1.Container) {
		for i := range cs {
			mounted := false
			for _, m := range cs[i].VolumeMounts {
				if m.MountPath == DefaultAPITokenMountPath {
					mounted = true
					break
				}
			}
			if !mounted {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	addMount(pod.Spec.InitContainers)
	addMount(pod.Spec.Containers)
	if !hasVolume && needed {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volumeName, VolumeSource: corev1.VolumeSource{Projected: TokenVolumeSource()}})
	}
}

// TokenVolumeSource is the projected volume Kubernetes gives every pod: a bound token,
// the cluster CA and the pod's namespace.
func TokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To(corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(TokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMapName},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}
