package resources

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Definition is one resource and how to build its subresources.
type Definition = endpoints.Definition

func labelsSet(m map[string]string) labels.Set { return labels.Set(m) }

// SystemNamespaces exist from the first start and may not be deleted.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// Core returns the resources of the core ("") group, version v1.
func Core() []Definition {
	gv := corev1.SchemeGroupVersion
	return []Definition{
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "namespaces", SingularName: "namespace", Kind: "Namespace", ListKind: "NamespaceList",
			ShortNames: []string{"ns"}, NewFunc: func() runtime.Object { return &corev1.Namespace{} },
			ValidateName: apimachineryvalidation.ValidateNamespaceName,
			NewListFunc:  func() runtime.Object { return &corev1.NamespaceList{} },
			Strategy:     namespaceStrategy(), StatusStrategy: statusOnly(),
			GetAttrs: func(obj runtime.Object) (labels.Set, fields.Set, error) {
				ns := obj.(*corev1.Namespace)
				return labels.Set(ns.Labels), fields.Set{"metadata.name": ns.Name, "status.phase": string(ns.Status.Phase)}, nil
			},
			FieldLabels: []string{"status.phase"},
			Printer: &registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Status", Type: "string", Description: "The status of the namespace"}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					ns := obj.(*corev1.Namespace)
					return []any{ns.Name, string(ns.Status.Phase), endpoints.Age(ns.CreationTimestamp, time.Now())}
				},
			},
			DeleteNotAllowed: func(obj runtime.Object) error {
				ns := obj.(*corev1.Namespace)
				if slices.Contains(SystemNamespaces, ns.Name) {
					return apierrors.NewForbidden(corev1.Resource("namespaces"), ns.Name, fmt.Errorf("this namespace may not be deleted"))
				}
				return nil
			},
			OnDeleteMarked: func(obj runtime.Object) { obj.(*corev1.Namespace).Status.Phase = corev1.NamespaceTerminating },
			Retain:         func(obj runtime.Object) bool { return len(obj.(*corev1.Namespace).Spec.Finalizers) > 0 },
		}, Subresources: func(s *endpoints.Scope) []endpoints.Subresource {
			return []endpoints.Subresource{endpoints.StatusSubresource(s, statusOnly()), finalizeSubresource(s)}
		}},
		{Resource: podResource(), Subresources: podSubresources},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, GroupVersion: gv, Name: "nodes", SingularName: "node", Kind: "Node", ListKind: "NodeList",
			ShortNames: []string{"no"}, NewFunc: func() runtime.Object { return &corev1.Node{} },
			NewListFunc: func() runtime.Object { return &corev1.NodeList{} },
			Strategy: &strategy{
				// The kubelet registers its node with its status.
				prepareUpdate: func(obj, old runtime.Object) { obj.(*corev1.Node).Status = old.(*corev1.Node).Status },
				validate:      validateNode, validateOnUpdate: true,
			},
			StatusStrategy: statusOnly(),
			GetAttrs: func(obj runtime.Object) (labels.Set, fields.Set, error) {
				n := obj.(*corev1.Node)
				return labels.Set(n.Labels), fields.Set{"metadata.name": n.Name, "spec.unschedulable": fmt.Sprint(n.Spec.Unschedulable)}, nil
			},
			FieldLabels: []string{"spec.unschedulable"},
			Printer:     nodePrinter(),
		}, Subresources: statusSub},
		simple(gv, "configmaps", "configmap", "ConfigMap", []string{"cm"}, func() runtime.Object { return &corev1.ConfigMap{} },
			func() runtime.Object { return &corev1.ConfigMapList{} }, &strategy{validate: validateConfigMap, validateUpdate: validateConfigMapUpdate, validateOnUpdate: true},
			&registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Data", Type: "integer", Description: "Number of data entries"}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					cm := obj.(*corev1.ConfigMap)
					return []any{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), endpoints.Age(cm.CreationTimestamp, time.Now())}
				},
			}),
		simple(gv, "secrets", "secret", "Secret", nil, func() runtime.Object { return &corev1.Secret{} },
			func() runtime.Object { return &corev1.SecretList{} }, secretStrategy(),
			&registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Type", Type: "string"}, {Name: "Data", Type: "integer"}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					s := obj.(*corev1.Secret)
					return []any{s.Name, string(s.Type), int64(len(s.Data)), endpoints.Age(s.CreationTimestamp, time.Now())}
				},
			}),
		simple(gv, "serviceaccounts", "serviceaccount", "ServiceAccount", []string{"sa"}, func() runtime.Object { return &corev1.ServiceAccount{} },
			func() runtime.Object { return &corev1.ServiceAccountList{} }, &strategy{},
			&registry.Printer{
				Columns: []registry.TableColumn{endpoints.NameColumn, {Name: "Secrets", Type: "string"}, endpoints.AgeColumn},
				Row: func(obj runtime.Object) []any {
					sa := obj.(*corev1.ServiceAccount)
					return []any{sa.Name, int64(len(sa.Secrets)), endpoints.Age(sa.CreationTimestamp, time.Now())}
				},
			}),
		coreEvents(),
		podTemplates(),
	}
}

// podTemplates serves core/v1 PodTemplates: stored pod templates with the pod spec
// defaults and the pod spec validation pods get.
func podTemplates() Definition {
	return simple(corev1.SchemeGroupVersion, "podtemplates", "podtemplate", "PodTemplate", nil,
		func() runtime.Object { return &corev1.PodTemplate{} }, func() runtime.Object { return &corev1.PodTemplateList{} },
		&strategy{
			defaults: func(obj runtime.Object) { defaultPodSpec(&obj.(*corev1.PodTemplate).Template.Spec) },
			validate: validatePodTemplate, validateOnUpdate: true,
		},
		&registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "Containers", Type: "string", Description: "Names of each container in the template."},
				{Name: "Images", Type: "string", Description: "Images referenced by each container in the template."},
				{Name: "Pod Labels", Type: "string", Description: "The labels for the pod template."}},
			Row: func(obj runtime.Object) []any {
				t := obj.(*corev1.PodTemplate)
				names, images := containersAndImages(&t.Template.Spec)
				return []any{t.Name, names, images, labels.FormatLabels(t.Template.Labels)}
			},
		})
}

// validatePodTemplate checks the template's labels and annotations and its pod spec, as
// Kubernetes' ValidatePodTemplate does (the spec as far as validatePodSpec goes).
func validatePodTemplate(obj runtime.Object) field.ErrorList {
	t := obj.(*corev1.PodTemplate)
	p := field.NewPath("template")
	errs := validateLabelMap(t.Template.Labels, p.Child("metadata", "labels"))
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(t.Template.Annotations, p.Child("metadata", "annotations"))...)
	return append(errs, validateTemplatePodSpec(&t.Template.Spec, p.Child("spec"))...)
}

func statusSub(s *endpoints.Scope) []endpoints.Subresource {
	return []endpoints.Subresource{endpoints.StatusSubresource(s, statusOnly())}
}

// simple defines a namespaced resource with no subresources.
func simple(gv schema.GroupVersion, name, singular, kind string, short []string, newFn, newList func() runtime.Object, st registry.Strategy, p *registry.Printer) Definition {
	return Definition{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, GroupVersion: gv, Name: name, SingularName: singular, Kind: kind, ListKind: kind + "List",
		ShortNames: short, Namespaced: true, NewFunc: newFn, NewListFunc: newList, Strategy: st, Printer: p,
	}}
}

// statusOnly is the strategy of a status subresource, as Kubernetes' status strategies
// are: the spec (every field but metadata and status) is kept from the stored object; the
// status and the metadata a client may set (labels, annotations, finalizers, owner
// references) come from the write. The server's own metadata is kept by the store.
func statusOnly() registry.Strategy { return statusStrategy(nil) }

// workloadStatusOnly is statusOnly for the apps workloads, whose status writes may not
// change labels either (they select the workload's pods).
func workloadStatusOnly() registry.Strategy {
	return statusStrategy(func(obj, old metav1.Object) { obj.SetLabels(old.GetLabels()) })
}

// podStatusOnly is statusOnly for pods, whose status writes may not change owner
// references (old kubelets corrupted them, breaking garbage collection).
func podStatusOnly() registry.Strategy {
	return statusStrategy(func(obj, old metav1.Object) { obj.SetOwnerReferences(old.GetOwnerReferences()) })
}

func statusStrategy(keepMeta func(obj, old metav1.Object)) registry.Strategy {
	return &strategy{prepareUpdate: func(obj, old runtime.Object) {
		nv, ov := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old.DeepCopyObject()).Elem()
		for i := 0; i < nv.NumField(); i++ {
			switch nv.Type().Field(i).Name {
			case "TypeMeta", "ObjectMeta", "Status":
				continue
			}
			nv.Field(i).Set(ov.Field(i))
		}
		if keepMeta != nil {
			keepMeta(obj.(metav1.Object), old.(metav1.Object))
		}
	}}
}

func namespaceStrategy() registry.Strategy {
	return &strategy{
		defaults: func(obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
		},
		prepareCreate: func(obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
		},
		prepareUpdate: func(obj, old runtime.Object) {
			ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
			ns.Spec.Finalizers = o.Spec.Finalizers
			ns.Status = o.Status
		},
	}
}

// finalizeSubresource serves PUT namespaces/{name}/finalize, which alone changes
// spec.finalizers; the namespace goes away when the last one is removed.
func finalizeSubresource(s *endpoints.Scope) endpoints.Subresource {
	st := &strategy{prepareUpdate: func(obj, old runtime.Object) {
		ns, o := obj.(*corev1.Namespace), old.(*corev1.Namespace)
		fin := ns.Spec.Finalizers
		*ns = *o.DeepCopy()
		ns.Spec.Finalizers = fin
	}}
	return endpoints.Subresource{Name: "finalize", Handlers: map[string]endpoints.HandlerFunc{
		http.MethodPut: func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
			s.Update(w, req, r, st)
		},
	}}
}

func validateNode(obj runtime.Object) field.ErrorList {
	n := obj.(*corev1.Node)
	var errs field.ErrorList
	for i, t := range n.Spec.Taints {
		p := field.NewPath("spec", "taints").Index(i)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
		}
	}
	return errs
}

func validateConfigMap(obj runtime.Object) field.ErrorList {
	cm := obj.(*corev1.ConfigMap)
	var errs field.ErrorList
	total := 0
	for k, v := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
		}
		total += len(v)
	}
	for k, v := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		total += len(v)
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// validateConfigMapUpdate refuses, as Kubernetes' ValidateConfigMapUpdate does, any
// change to the contents of a ConfigMap marked immutable, and unmarking it.
func validateConfigMapUpdate(obj, old runtime.Object) field.ErrorList {
	cm, o := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
	if !isImmutable(o.Immutable) {
		return nil
	}
	return immutableErrors(cm.Immutable, immutableField{"data", cm.Data, o.Data}, immutableField{"binaryData", cm.BinaryData, o.BinaryData})
}

func isImmutable(b *bool) bool { return b != nil && *b }

// immutableField is one content field of an object marked immutable, new and old value.
type immutableField struct {
	name     string
	now, was any
}

// immutableErrors are the errors of an update to an object whose stored version has
// `immutable: true`: the mark may not be dropped and no content field may change.
func immutableErrors(now *bool, fs ...immutableField) field.ErrorList {
	const msg = "field is immutable when `immutable` is set"
	var errs field.ErrorList
	if !isImmutable(now) {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
	}
	for _, f := range fs {
		if !reflect.DeepEqual(f.now, f.was) {
			errs = append(errs, field.Forbidden(field.NewPath(f.name), msg))
		}
	}
	return errs
}

func secretStrategy() registry.Strategy {
	return &strategy{
		defaults: func(obj runtime.Object) {
			s := obj.(*corev1.Secret)
			if s.Type == "" {
				s.Type = corev1.SecretTypeOpaque
			}
			// stringData is write-only: it is merged into data, as in Kubernetes.
			for k, v := range s.StringData {
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				s.Data[k] = []byte(v)
			}
			s.StringData = nil
		},
		validate: func(obj runtime.Object) field.ErrorList {
			s := obj.(*corev1.Secret)
			var errs field.ErrorList
			total := 0
			for k, v := range s.Data {
				for _, msg := range validation.IsConfigMapKey(k) {
					errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
				}
				total += len(v)
			}
			if total > corev1.MaxSecretSize {
				errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
			}
			return errs
		},
		validateOnUpdate: true,
		validateUpdate: func(obj, old runtime.Object) field.ErrorList {
			s, o := obj.(*corev1.Secret), old.(*corev1.Secret)
			errs := apimachineryvalidation.ValidateImmutableField(s.Type, o.Type, field.NewPath("type"))
			if isImmutable(o.Immutable) {
				// stringData is already merged into data by the defaults, so a change
				// through either shows up here as a change of data.
				errs = append(errs, immutableErrors(s.Immutable, immutableField{"data", s.Data, o.Data})...)
			}
			return errs
		},
	}
}

func coreEvents() Definition {
	return Definition{Resource: &registry.Resource{
		AllowUnconditionalUpdate: true, AllowCreateOnUpdate: true, GroupVersion: corev1.SchemeGroupVersion, Name: "events", SingularName: "event", Kind: "Event", ListKind: "EventList",
		ShortNames: []string{"ev"}, Namespaced: true,
		NewFunc:     func() runtime.Object { return &corev1.Event{} },
		NewListFunc: func() runtime.Object { return &corev1.EventList{} },
		Strategy: &strategy{validate: func(obj runtime.Object) field.ErrorList {
			e := obj.(*corev1.Event)
			var errs field.ErrorList
			if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != e.Namespace {
				errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
			}
			return errs
		}, validateOnUpdate: true},
		GetAttrs: coreEventAttrs,
		FieldLabels: []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
			"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"},
		Printer: eventPrinter(),
	}}
}
