package resources

import (
	"fmt"
	"reflect"
	"unicode"
	"unicode/utf8"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// mirrorPodAnnotation marks a static pod's mirror; Kubernetes refuses ephemeral
// containers on those because the kubelet runs them from a file, not from the API.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// ephemeralContainersSubresource serves pods/ephemeralcontainers: GET returns the pod,
// PUT and PATCH (kubectl debug sends a strategic merge patch) may only add ephemeral
// containers. It is its own subresource so that RBAC, the node authorizer and admission
// tell it from an update of the pod.
func ephemeralContainersSubresource(s *endpoints.Scope) endpoints.Subresource {
	return endpoints.UpdateSubresource(s, "ephemeralcontainers", ephemeralContainersStrategy())
}

// ephemeralContainersStrategy keeps everything of the stored pod but
// spec.ephemeralContainers, as Kubernetes' podEphemeralContainersStrategy does: labels,
// status and the rest of the spec sent along are dropped, not refused.
func ephemeralContainersStrategy() registry.Strategy {
	return &strategy{
		defaults: func(obj runtime.Object) { defaultPodSpec(&obj.(*corev1.Pod).Spec) },
		prepareUpdate: func(obj, old runtime.Object) {
			pod := obj.(*corev1.Pod)
			kept := old.(*corev1.Pod).DeepCopy()
			kept.TypeMeta = pod.TypeMeta
			kept.Name, kept.Namespace, kept.ResourceVersion, kept.UID = pod.Name, pod.Namespace, pod.ResourceVersion, pod.UID
			kept.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
			*pod = *kept
		},
		validate: func(obj runtime.Object) field.ErrorList {
			return validatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
		},
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return validateEphemeralContainersUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
		validateOnUpdate: true,
	}
}

// validatePodCreate refuses what a pod may only get after it exists.
func validatePodCreate(pod *corev1.Pod) field.ErrorList {
	if len(pod.Spec.EphemeralContainers) > 0 {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create")}
	}
	return nil
}

// validateEphemeralContainersUpdate lets an update add ephemeral containers and nothing
// else: the kubelet starts each once and never restarts, changes or removes it.
func validateEphemeralContainersUpdate(pod, old *corev1.Pod) field.ErrorList {
	if _, ok := old.Annotations[mirrorPodAnnotation]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations").Key(mirrorPodAnnotation), "static pods do not support ephemeral containers")}
	}
	path := field.NewPath("spec", "ephemeralContainers")
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range pod.Spec.EphemeralContainers {
		byName[pod.Spec.EphemeralContainers[i].Name] = &pod.Spec.EphemeralContainers[i]
	}
	var errs field.ErrorList
	for _, o := range old.Spec.EphemeralContainers {
		n, ok := byName[o.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("existing ephemeral containers %q may not be removed", o.Name)))
		case !apiequality.Semantic.DeepEqual(o, *n):
			errs = append(errs, field.Forbidden(path.Key(o.Name), fmt.Sprintf("existing ephemeral containers %q may not be changed", o.Name)))
		}
	}
	return errs
}

// ephemeralContainerFields are the container fields an ephemeral container may set.
// An allow list, as in Kubernetes, so that a field added to Container is refused until
// someone decides it makes sense for a debugging container: ports, probes, resources and
// lifecycle hooks do not, since nothing may rely on an ephemeral container.
var ephemeralContainerFields = sets.New(
	"Name", "Image", "Command", "Args", "WorkingDir", "EnvFrom", "Env", "VolumeMounts", "VolumeDevices",
	"TerminationMessagePath", "TerminationMessagePolicy", "ImagePullPolicy", "SecurityContext",
	"Stdin", "StdinOnce", "TTY",
)

// validateEphemeralContainers checks spec.ephemeralContainers as Kubernetes does; names
// holds the names of the pod's other containers, and receives these.
func validateEphemeralContainers(spec *corev1.PodSpec, path *field.Path, names sets.Set[string]) field.ErrorList {
	targets := sets.New[string]()
	for _, c := range spec.InitContainers {
		targets.Insert(c.Name)
	}
	for _, c := range spec.Containers {
		targets.Insert(c.Name)
	}
	var errs field.ErrorList
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		p := path.Index(i)
		errs = append(errs, validateContainer((*corev1.Container)(&ec.EphemeralContainerCommon), p, names)...)
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		v := reflect.ValueOf(ec.EphemeralContainerCommon)
		for j := 0; j < v.NumField(); j++ {
			f := v.Type().Field(j)
			if !ephemeralContainerFields.Has(f.Name) && !v.Field(j).IsZero() {
				errs = append(errs, field.Forbidden(p.Child(lowerFirst(f.Name)), "cannot be set for an Ephemeral Container"))
			}
		}
		// Sub-path mounts are bind mounts that outlive the container until the pod goes,
		// and they mean the container is part of the workload.
		for j, m := range ec.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return errs
}

// lowerFirst turns a Go field name into its JSON name, which for Container's fields is
// the name with a lower-case first letter.
func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToLower(r)) + s[n:]
}

// validateTemplatePodSpec checks a pod template's spec: a pod spec that may not hold
// ephemeral containers, which only an existing pod gets.
func validateTemplatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	errs := validatePodSpec(spec, path)
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}
