package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"net/http"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Apps returns the apps/v1 resources.
func Apps() []Definition {
	gv := appsv1.SchemeGroupVersion
	return append([]Definition{
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "deployments", SingularName: "deployment", Kind: "Deployment", ListKind: "DeploymentList",
			ShortNames: []string{"deploy"}, Categories: []string{"all"}, Namespaced: true, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &appsv1.Deployment{} },
			NewListFunc: func() runtime.Object { return &appsv1.DeploymentList{} },
			Strategy: &strategy{
				defaults:      func(obj runtime.Object) { defaultDeployment(obj.(*appsv1.Deployment)) },
				prepareCreate: func(obj runtime.Object) { obj.(*appsv1.Deployment).Status = appsv1.DeploymentStatus{} },
				prepareUpdate: func(obj, old runtime.Object) { obj.(*appsv1.Deployment).Status = old.(*appsv1.Deployment).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					d := obj.(*appsv1.Deployment)
					return validateWorkload(d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, field.NewPath("spec"))
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return apimachineryvalidation.ValidateImmutableField(obj.(*appsv1.Deployment).Spec.Selector, old.(*appsv1.Deployment).Spec.Selector, field.NewPath("spec", "selector"))
				},
			},
			StatusStrategy: workloadStatusOnly(),
			ResetFields:    apply.StatusResetFields(map[string][]fieldpath.Path{apply.Status: {fieldpath.MakePathOrDie("metadata", "labels")}}),
			Printer:        deploymentPrinter(),
		}, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			return []endpoints.Subresource{endpoints.StatusSubresource(s, workloadStatusOnly()), scaleSubresource(s, deploymentScale{})}
		}},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "replicasets", SingularName: "replicaset", Kind: "ReplicaSet", ListKind: "ReplicaSetList",
			ShortNames: []string{"rs"}, Categories: []string{"all"}, Namespaced: true, TracksGeneration: true,
			NewFunc:     func() runtime.Object { return &appsv1.ReplicaSet{} },
			NewListFunc: func() runtime.Object { return &appsv1.ReplicaSetList{} },
			Strategy: &strategy{
				defaults: func(obj runtime.Object) {
					rs := obj.(*appsv1.ReplicaSet)
					if rs.Spec.Replicas == nil {
						rs.Spec.Replicas = ptr.To[int32](1)
					}
					defaultPodSpec(&rs.Spec.Template.Spec)
				},
				prepareCreate: func(obj runtime.Object) { obj.(*appsv1.ReplicaSet).Status = appsv1.ReplicaSetStatus{} },
				prepareUpdate: func(obj, old runtime.Object) { obj.(*appsv1.ReplicaSet).Status = old.(*appsv1.ReplicaSet).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					rs := obj.(*appsv1.ReplicaSet)
					return validateWorkload(rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template, field.NewPath("spec"))
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return apimachineryvalidation.ValidateImmutableField(obj.(*appsv1.ReplicaSet).Spec.Selector, old.(*appsv1.ReplicaSet).Spec.Selector, field.NewPath("spec", "selector"))
				},
			},
			StatusStrategy: workloadStatusOnly(),
			Printer:        replicaSetPrinter(),
		}, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			return []endpoints.Subresource{endpoints.StatusSubresource(s, workloadStatusOnly()), scaleSubresource(s, replicaSetScale{})}
		}},
	}, daemonSetsAndHistory()...)
}

func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	if d.Spec.Strategy.Type == "" {
		d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if d.Spec.Strategy.RollingUpdate == nil {
			d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &quarter
		}
		if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
			q := quarter
			d.Spec.Strategy.RollingUpdate.MaxSurge = &q
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	defaultPodSpec(&d.Spec.Template.Spec)
}

func validateWorkload(replicas *int32, sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if replicas != nil && *replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("replicas"), *replicas, "must be greater than or equal to 0"))
	}
	errs = append(errs, validateSelectorMatches(sel, tmpl.Labels, path)...)
	errs = append(errs, validateTemplatePodSpec(&tmpl.Spec, path.Child("template", "spec"))...)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(path.Child("template", "spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	return errs
}

// scalable adapts a workload to autoscaling/v1 Scale.
type scalable interface {
	toScale(obj runtime.Object) (*autoscalingv1.Scale, error)
	setReplicas(obj runtime.Object, n int32)
}

type deploymentScale struct{}

func (deploymentScale) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	d := obj.(*appsv1.Deployment)
	return scaleOf(d.ObjectMeta, d.Spec.Replicas, d.Status.Replicas, d.Spec.Selector)
}

func (deploymentScale) setReplicas(obj runtime.Object, n int32) {
	obj.(*appsv1.Deployment).Spec.Replicas = &n
}

type replicaSetScale struct{}

func (replicaSetScale) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	rs := obj.(*appsv1.ReplicaSet)
	return scaleOf(rs.ObjectMeta, rs.Spec.Replicas, rs.Status.Replicas, rs.Spec.Selector)
}

func (replicaSetScale) setReplicas(obj runtime.Object, n int32) {
	obj.(*appsv1.ReplicaSet).Spec.Replicas = &n
}

func scaleOf(m metav1.ObjectMeta, spec *int32, status int32, sel *metav1.LabelSelector) (*autoscalingv1.Scale, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Spec:       autoscalingv1.ScaleSpec{Replicas: ptr.Deref(spec, 1)},
		Status:     autoscalingv1.ScaleStatus{Replicas: status, Selector: s.String()},
	}, nil
}

// scaleSubresource serves get/update of autoscaling/v1 Scale for a workload.
func scaleSubresource(s *endpoints.Scope, sc scalable) endpoints.Subresource {
	get := func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusOK, func(ctx context.Context, _ func(runtime.Object) error) (runtime.Object, error) {
			obj, err := s.Store.Get(ctx, r.Namespace, r.Name, nil)
			if err != nil {
				return nil, err
			}
			return sc.toScale(obj)
		})
	}
	// update applies next (the requested Scale computed from the current one) to the workload.
	update := func(ctx context.Context, req *http.Request, r endpoints.Request, next func(current *autoscalingv1.Scale) (*autoscalingv1.Scale, error)) (runtime.Object, error) {
		out, _, err := s.Store.Update(ctx, r.Namespace, r.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
			if existing == nil {
				return nil, apierrors.NewNotFound(s.Store.Resource.GroupResource(), r.Name)
			}
			current, err := sc.toScale(existing)
			if err != nil {
				return nil, err
			}
			scale, err := next(current)
			if err != nil {
				return nil, err
			}
			if scale.Spec.Replicas < 0 {
				return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), r.Name,
					field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0")})
			}
			obj := existing.DeepCopyObject()
			if scale.ResourceVersion != "" {
				if err := setRV(obj, scale.ResourceVersion); err != nil {
					return nil, err
				}
			}
			sc.setReplicas(obj, scale.Spec.Replicas)
			return obj, nil
		}, registry.UpdateOptions{WriteOptions: s.WriteOptionsFor(req, r), AllowUnconditional: true})
		if err != nil {
			return nil, err
		}
		return sc.toScale(out)
	}
	put := func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusOK, func(ctx context.Context, body func(runtime.Object) error) (runtime.Object, error) {
			scale := &autoscalingv1.Scale{}
			if err := body(scale); err != nil {
				return nil, err
			}
			return update(ctx, req, r, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return scale, nil })
		})
	}
	patch := func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusOK, func(ctx context.Context, _ func(runtime.Object) error) (runtime.Object, error) {
			pt, body, err := s.PatchBody(req)
			if err != nil {
				return nil, err
			}
			return update(ctx, req, r, func(current *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
				current.APIVersion, current.Kind = autoscalingv1.SchemeGroupVersion.String(), "Scale"
				orig, err := json.Marshal(current)
				if err != nil {
					return nil, apierrors.NewInternalError(err)
				}
				patched, err := endpoints.ApplyPatch(pt, orig, body, &autoscalingv1.Scale{})
				if err != nil {
					return nil, err
				}
				out := &autoscalingv1.Scale{}
				if err := json.Unmarshal(patched, out); err != nil {
					return nil, apierrors.NewBadRequest(fmt.Sprintf("the patched Scale does not decode: %v", err))
				}
				return out, nil
			})
		})
	}
	return endpoints.Subresource{Name: "scale", Kind: autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
		Handlers: map[string]endpoints.HandlerFunc{http.MethodGet: get, http.MethodPut: put, http.MethodPatch: patch}}
}

func setRV(obj runtime.Object, rv string) error {
	m, ok := obj.(metav1.Object)
	if !ok {
		return apierrors.NewInternalError(nil)
	}
	m.SetResourceVersion(rv)
	return nil
}

func containersAndImages(spec *corev1.PodSpec) (string, string) {
	var names, images []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "<error>"
	}
	if s.Empty() {
		return "<none>"
	}
	return s.String()
}

var wideWorkloadColumns = []registry.TableColumn{
	{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
	{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	{Name: "Selector", Type: "string", Priority: 1, Description: "Label selector for pods."},
}

func deploymentPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			{Name: "Up-to-date", Type: "integer", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
			{Name: "Available", Type: "integer", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			d := obj.(*appsv1.Deployment)
			c, i := containersAndImages(&d.Spec.Template.Spec)
			return []any{d.Name, readyOf(d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 0)), int64(d.Status.UpdatedReplicas),
				int64(d.Status.AvailableReplicas), endpoints.Age(d.CreationTimestamp, time.Now()), c, i, selectorString(d.Spec.Selector)}
		},
	}
}

func readyOf(ready, want int32) string {
	return itoa(ready) + "/" + itoa(want)
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func replicaSetPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Desired", Type: "integer", Description: appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"]},
			{Name: "Current", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"]},
			{Name: "Ready", Type: "integer", Description: appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"]},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			rs := obj.(*appsv1.ReplicaSet)
			c, i := containersAndImages(&rs.Spec.Template.Spec)
			return []any{rs.Name, int64(ptr.Deref(rs.Spec.Replicas, 0)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
				endpoints.Age(rs.CreationTimestamp, time.Now()), c, i, selectorString(rs.Spec.Selector)}
		},
	}
}

// Coordination returns coordination.k8s.io/v1 resources.
func Coordination() []Definition {
	d := simple(coordinationv1.SchemeGroupVersion, "leases", "lease", "Lease", nil,
		func() runtime.Object { return &coordinationv1.Lease{} }, func() runtime.Object { return &coordinationv1.LeaseList{} },
		&strategy{}, &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]}, endpoints.AgeColumn},
			Row: func(obj runtime.Object) []any {
				l := obj.(*coordinationv1.Lease)
				return []any{l.Name, ptr.Deref(l.Spec.HolderIdentity, ""), endpoints.Age(l.CreationTimestamp, time.Now())}
			},
		})
	// As Kubernetes' lease strategy: a PUT may create a lease, and must name the
	// revision it replaces (leader election depends on it).
	d.Resource.AllowCreateOnUpdate = true
	d.Resource.AllowUnconditionalUpdate = false
	return []Definition{d}
}

// withScale adds the autoscaling/v1 scale subresource to a workload defined with a
// status subresource, with the apps workloads' status strategy (labels kept).
func withScale(d Definition, sc scalable) Definition {
	d.Resource.StatusStrategy = workloadStatusOnly()
	d.Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
		return []endpoints.Subresource{endpoints.StatusSubresource(s, workloadStatusOnly()), scaleSubresource(s, sc)}
	}
	return d
}

type replicationControllerScale struct{}

func (replicationControllerScale) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	rc := obj.(*corev1.ReplicationController)
	return scaleOf(rc.ObjectMeta, rc.Spec.Replicas, rc.Status.Replicas, &metav1.LabelSelector{MatchLabels: rc.Spec.Selector})
}

func (replicationControllerScale) setReplicas(obj runtime.Object, n int32) {
	obj.(*corev1.ReplicationController).Spec.Replicas = &n
}

type statefulSetScale struct{}

func (statefulSetScale) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) {
	s := obj.(*appsv1.StatefulSet)
	return scaleOf(s.ObjectMeta, s.Spec.Replicas, s.Status.Replicas, s.Spec.Selector)
}

func (statefulSetScale) setReplicas(obj runtime.Object, n int32) {
	obj.(*appsv1.StatefulSet).Spec.Replicas = &n
}

// replicationControllerPrinter has kubectl's ReplicationController columns.
func replicationControllerPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: append([]registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Desired", Type: "integer", Description: corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"]},
			{Name: "Current", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"]},
			{Name: "Ready", Type: "integer", Description: corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"]},
			endpoints.AgeColumn,
		}, wideWorkloadColumns...),
		Row: func(obj runtime.Object) []any {
			rc := obj.(*corev1.ReplicationController)
			var c, i string
			if rc.Spec.Template != nil {
				c, i = containersAndImages(&rc.Spec.Template.Spec)
			}
			return []any{rc.Name, int64(ptr.Deref(rc.Spec.Replicas, 0)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
				endpoints.Age(rc.CreationTimestamp, time.Now()), c, i, selectorString(&metav1.LabelSelector{MatchLabels: rc.Spec.Selector})}
		},
	}
}

// statefulSetPrinter has kubectl's StatefulSet columns.
func statefulSetPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
			endpoints.AgeColumn,
			{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
			{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		},
		Row: func(obj runtime.Object) []any {
			s := obj.(*appsv1.StatefulSet)
			c, i := containersAndImages(&s.Spec.Template.Spec)
			return []any{s.Name, readyOf(s.Status.ReadyReplicas, ptr.Deref(s.Spec.Replicas, 0)), endpoints.Age(s.CreationTimestamp, time.Now()), c, i}
		},
	}
}
