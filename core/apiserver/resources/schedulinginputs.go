package resources

import (
	"strings"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// SchedulingInputs returns the resources kube-scheduler's informers watch besides pods
// and nodes: services, replication controllers, persistent volumes and claims (v1),
// stateful sets (apps/v1), the storage.k8s.io/v1 kinds, pod disruption budgets
// (policy/v1) and the resource.k8s.io/v1 (DRA) kinds. They are stored as they are sent,
// with Kubernetes' v1 defaults for the fields its defaulters set and validation of names
// and required fields; nothing in wasmplane acts on them yet.
func SchedulingInputs() []Definition {
	core, apps := corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion
	st, pol, dra := storagev1.SchemeGroupVersion, policyv1.SchemeGroupVersion, resourcev1.SchemeGroupVersion
	return []Definition{
		stored(core, "services", "Service", []string{"svc"}, true, true, func() runtime.Object { return &corev1.Service{} },
			func() runtime.Object { return &corev1.ServiceList{} }, &strategy{
				defaults:      func(obj runtime.Object) { defaultService(obj.(*corev1.Service)) },
				prepareCreate: servicesPrepareCreate,
				prepareUpdate: servicesPrepareUpdate,
				validate: func(obj runtime.Object) field.ErrorList {
					s := obj.(*corev1.Service)
					return append(validateService(s), validateServiceIPs(s)...)
				},
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					s, o := obj.(*corev1.Service), old.(*corev1.Service)
					// A Service becoming ExternalName gives its cluster IP up.
					if o.Spec.ClusterIP == "" || s.Spec.ClusterIP == o.Spec.ClusterIP ||
						(s.Spec.Type == corev1.ServiceTypeExternalName && s.Spec.ClusterIP == "") {
						return nil
					}
					return apimachineryvalidation.ValidateImmutableField(s.Spec.ClusterIP, o.Spec.ClusterIP, field.NewPath("spec", "clusterIP"))
				},
				validateOnUpdate: true,
			}, inCategory("all"), createOnUpdate, func(r *registry.Resource) { r.Printer = servicePrinter() }),
		withScale(stored(core, "replicationcontrollers", "ReplicationController", []string{"rc"}, true, true,
			func() runtime.Object { return &corev1.ReplicationController{} },
			func() runtime.Object { return &corev1.ReplicationControllerList{} }, &strategy{
				defaults: func(obj runtime.Object) {
					rc := obj.(*corev1.ReplicationController)
					if rc.Spec.Replicas == nil {
						rc.Spec.Replicas = ptr.To[int32](1)
					}
					// As Kubernetes' defaulter: an empty selector is the template's labels.
					if rc.Spec.Template != nil {
						if len(rc.Spec.Selector) == 0 {
							rc.Spec.Selector = rc.Spec.Template.Labels
						}
						if len(rc.Labels) == 0 {
							rc.Labels = rc.Spec.Template.Labels
						}
						defaultPodSpec(&rc.Spec.Template.Spec)
					}
				},
				prepareCreate: func(obj runtime.Object) {
					obj.(*corev1.ReplicationController).Status = corev1.ReplicationControllerStatus{}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*corev1.ReplicationController).Status = old.(*corev1.ReplicationController).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					rc := obj.(*corev1.ReplicationController)
					p := field.NewPath("spec")
					var errs field.ErrorList
					if rc.Spec.Replicas != nil && *rc.Spec.Replicas < 0 {
						errs = append(errs, field.Invalid(p.Child("replicas"), *rc.Spec.Replicas, "must be greater than or equal to 0"))
					}
					if len(rc.Spec.Selector) == 0 {
						errs = append(errs, field.Required(p.Child("selector"), ""))
					}
					if rc.Spec.Template == nil {
						return append(errs, field.Required(p.Child("template"), ""))
					}
					if !labels.SelectorFromSet(rc.Spec.Selector).Matches(labels.Set(rc.Spec.Template.Labels)) {
						errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), rc.Spec.Template.Labels, "`selector` does not match template `labels`"))
					}
					return append(errs, validateTemplatePodSpec(&rc.Spec.Template.Spec, p.Child("template", "spec"))...)
				},
				validateOnUpdate: true,
			}, inCategory("all"), func(r *registry.Resource) {
				r.Printer = replicationControllerPrinter()
				// Served in core/v1 only, where Kubernetes keeps orphaning as the
				// default for backward compatibility.
				r.OrphanByDefault = true
			}), replicationControllerScale{}),
		stored(core, "persistentvolumes", "PersistentVolume", []string{"pv"}, false, true,
			func() runtime.Object { return &corev1.PersistentVolume{} },
			func() runtime.Object { return &corev1.PersistentVolumeList{} }, &strategy{
				defaults: func(obj runtime.Object) {
					pv := obj.(*corev1.PersistentVolume)
					if pv.Spec.PersistentVolumeReclaimPolicy == "" {
						pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
					}
					if pv.Spec.VolumeMode == nil {
						pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
					}
				},
				prepareCreate: func(obj runtime.Object) {
					obj.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*corev1.PersistentVolume).Status = old.(*corev1.PersistentVolume).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					pv := obj.(*corev1.PersistentVolume)
					p := field.NewPath("spec")
					errs := validateAccessModes(pv.Spec.AccessModes, p.Child("accessModes"))
					if _, ok := pv.Spec.Capacity[corev1.ResourceStorage]; !ok {
						errs = append(errs, field.Required(p.Child("capacity").Key(string(corev1.ResourceStorage)), ""))
					}
					if pv.Spec.StorageClassName != "" {
						errs = append(errs, dnsSubdomain(p.Child("storageClassName"), pv.Spec.StorageClassName)...)
					}
					return errs
				},
				validateOnUpdate: true,
			}),
		stored(core, "persistentvolumeclaims", "PersistentVolumeClaim", []string{"pvc"}, true, true,
			func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
			func() runtime.Object { return &corev1.PersistentVolumeClaimList{} }, &strategy{
				defaults: func(obj runtime.Object) {
					pvc := obj.(*corev1.PersistentVolumeClaim)
					if pvc.Spec.VolumeMode == nil {
						pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
					}
				},
				prepareCreate: func(obj runtime.Object) {
					obj.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*corev1.PersistentVolumeClaim).Status = old.(*corev1.PersistentVolumeClaim).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					pvc := obj.(*corev1.PersistentVolumeClaim)
					p := field.NewPath("spec")
					errs := validateAccessModes(pvc.Spec.AccessModes, p.Child("accessModes"))
					if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
						errs = append(errs, field.Required(p.Child("resources").Child("requests").Key(string(corev1.ResourceStorage)), ""))
					}
					if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
						errs = append(errs, dnsSubdomain(p.Child("storageClassName"), *pvc.Spec.StorageClassName)...)
					}
					return errs
				},
				validateOnUpdate: true,
			}),
		withScale(stored(apps, "statefulsets", "StatefulSet", []string{"sts"}, true, true, func() runtime.Object { return &appsv1.StatefulSet{} },
			func() runtime.Object { return &appsv1.StatefulSetList{} }, &strategy{
				defaults:      func(obj runtime.Object) { defaultStatefulSet(obj.(*appsv1.StatefulSet)) },
				prepareCreate: func(obj runtime.Object) { obj.(*appsv1.StatefulSet).Status = appsv1.StatefulSetStatus{} },
				prepareUpdate: func(obj, old runtime.Object) { obj.(*appsv1.StatefulSet).Status = old.(*appsv1.StatefulSet).Status },
				validate: func(obj runtime.Object) field.ErrorList {
					s := obj.(*appsv1.StatefulSet)
					return validateWorkload(s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, field.NewPath("spec"))
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return apimachineryvalidation.ValidateImmutableField(obj.(*appsv1.StatefulSet).Spec.Selector, old.(*appsv1.StatefulSet).Spec.Selector, field.NewPath("spec", "selector"))
				},
			}, inCategory("all"), func(r *registry.Resource) { r.Printer = statefulSetPrinter() }), statefulSetScale{}),
		stored(st, "storageclasses", "StorageClass", []string{"sc"}, false, false, func() runtime.Object { return &storagev1.StorageClass{} },
			func() runtime.Object { return &storagev1.StorageClassList{} }, &strategy{
				defaults: func(obj runtime.Object) {
					sc := obj.(*storagev1.StorageClass)
					if sc.ReclaimPolicy == nil {
						sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
					}
					if sc.VolumeBindingMode == nil {
						sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
					}
				},
				validate: func(obj runtime.Object) field.ErrorList {
					sc := obj.(*storagev1.StorageClass)
					if sc.Provisioner == "" {
						return field.ErrorList{field.Required(field.NewPath("provisioner"), "")}
					}
					return nil
				},
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					sc, o := obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
					return apimachineryvalidation.ValidateImmutableField(sc.Provisioner, o.Provisioner, field.NewPath("provisioner"))
				},
				validateOnUpdate: true,
			}),
		stored(st, "csinodes", "CSINode", nil, false, false, func() runtime.Object { return &storagev1.CSINode{} },
			func() runtime.Object { return &storagev1.CSINodeList{} }, &strategy{
				validate: func(obj runtime.Object) field.ErrorList {
					var errs field.ErrorList
					for i, d := range obj.(*storagev1.CSINode).Spec.Drivers {
						p := field.NewPath("spec", "drivers").Index(i)
						errs = append(errs, csiDriverName(p.Child("name"), d.Name)...)
						if d.NodeID == "" {
							errs = append(errs, field.Required(p.Child("nodeID"), ""))
						}
					}
					return errs
				},
				validateOnUpdate: true,
			}),
		stored(st, "csidrivers", "CSIDriver", nil, false, false, func() runtime.Object { return &storagev1.CSIDriver{} },
			func() runtime.Object { return &storagev1.CSIDriverList{} }, &strategy{
				defaults: func(obj runtime.Object) {
					d := obj.(*storagev1.CSIDriver)
					if d.Spec.AttachRequired == nil {
						d.Spec.AttachRequired = ptr.To(true)
					}
					if d.Spec.PodInfoOnMount == nil {
						d.Spec.PodInfoOnMount = ptr.To(false)
					}
					if d.Spec.StorageCapacity == nil {
						d.Spec.StorageCapacity = ptr.To(false)
					}
					if d.Spec.FSGroupPolicy == nil {
						d.Spec.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
					}
					if len(d.Spec.VolumeLifecycleModes) == 0 {
						d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
					}
					if d.Spec.RequiresRepublish == nil {
						d.Spec.RequiresRepublish = ptr.To(false)
					}
					if d.Spec.SELinuxMount == nil {
						d.Spec.SELinuxMount = ptr.To(false)
					}
				},
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					d, o := obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver)
					return apimachineryvalidation.ValidateImmutableField(d.Spec.AttachRequired, o.Spec.AttachRequired, field.NewPath("spec", "attachRequired"))
				},
			}, nameIs(csiDriverName)),
		stored(st, "csistoragecapacities", "CSIStorageCapacity", nil, true, false,
			func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
			func() runtime.Object { return &storagev1.CSIStorageCapacityList{} }, &strategy{
				validate: func(obj runtime.Object) field.ErrorList {
					c := obj.(*storagev1.CSIStorageCapacity)
					var errs field.ErrorList
					if c.StorageClassName == "" {
						errs = append(errs, field.Required(field.NewPath("storageClassName"), ""))
					} else {
						errs = append(errs, dnsSubdomain(field.NewPath("storageClassName"), c.StorageClassName)...)
					}
					if c.Capacity != nil && c.Capacity.Sign() < 0 {
						errs = append(errs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
					}
					return errs
				},
				validateOnUpdate: true,
			}),
		stored(st, "volumeattachments", "VolumeAttachment", nil, false, true, func() runtime.Object { return &storagev1.VolumeAttachment{} },
			func() runtime.Object { return &storagev1.VolumeAttachmentList{} }, &strategy{
				prepareCreate: func(obj runtime.Object) {
					obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*storagev1.VolumeAttachment).Status = old.(*storagev1.VolumeAttachment).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					va := obj.(*storagev1.VolumeAttachment)
					p := field.NewPath("spec")
					errs := csiDriverName(p.Child("attacher"), va.Spec.Attacher)
					if va.Spec.NodeName == "" {
						errs = append(errs, field.Required(p.Child("nodeName"), ""))
					}
					if (va.Spec.Source.PersistentVolumeName == nil) == (va.Spec.Source.InlineVolumeSpec == nil) {
						errs = append(errs, field.Required(p.Child("source"), "must specify exactly one of persistentVolumeName and inlineVolumeSpec"))
					}
					return errs
				},
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					va, o := obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment)
					return apimachineryvalidation.ValidateImmutableField(va.Spec, o.Spec, field.NewPath("spec"))
				},
			}),
		stored(pol, "poddisruptionbudgets", "PodDisruptionBudget", []string{"pdb"}, true, true,
			func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
			func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} }, &strategy{
				prepareCreate: func(obj runtime.Object) {
					obj.(*policyv1.PodDisruptionBudget).Status = policyv1.PodDisruptionBudgetStatus{}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*policyv1.PodDisruptionBudget).Status = old.(*policyv1.PodDisruptionBudget).Status
				},
				validate:         func(obj runtime.Object) field.ErrorList { return validatePDB(obj.(*policyv1.PodDisruptionBudget)) },
				validateOnUpdate: true,
			}, conditionalUpdateOnly),
		stored(dra, "resourceclaims", "ResourceClaim", nil, true, true, func() runtime.Object { return &resourcev1.ResourceClaim{} },
			func() runtime.Object { return &resourcev1.ResourceClaimList{} }, &strategy{
				prepareCreate: func(obj runtime.Object) { obj.(*resourcev1.ResourceClaim).Status = resourcev1.ResourceClaimStatus{} },
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*resourcev1.ResourceClaim).Status = old.(*resourcev1.ResourceClaim).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					return validateClaimSpec(&obj.(*resourcev1.ResourceClaim).Spec, field.NewPath("spec"))
				},
				// The spec of a claim is immutable in Kubernetes.
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					c, o := obj.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim)
					return apimachineryvalidation.ValidateImmutableField(c.Spec, o.Spec, field.NewPath("spec"))
				},
			}),
		// Templates, from which the claim controller makes a pod's claims; their spec is
		// immutable in Kubernetes, as a claim's is.
		stored(dra, "resourceclaimtemplates", "ResourceClaimTemplate", nil, true, false, func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
			func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} }, &strategy{
				validate: func(obj runtime.Object) field.ErrorList {
					t := obj.(*resourcev1.ResourceClaimTemplate)
					p := field.NewPath("spec")
					errs := validateLabelMap(t.Spec.Labels, p.Child("metadata", "labels"))
					errs = append(errs, apimachineryvalidation.ValidateAnnotations(t.Spec.Annotations, p.Child("metadata", "annotations"))...)
					return append(errs, validateClaimSpec(&t.Spec.Spec, p.Child("spec"))...)
				},
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					t, o := obj.(*resourcev1.ResourceClaimTemplate), old.(*resourcev1.ResourceClaimTemplate)
					return apimachineryvalidation.ValidateImmutableField(t.Spec, o.Spec, field.NewPath("spec"))
				},
			}),
		stored(dra, "resourceslices", "ResourceSlice", nil, false, false, func() runtime.Object { return &resourcev1.ResourceSlice{} },
			func() runtime.Object { return &resourcev1.ResourceSliceList{} }, &strategy{
				validate: func(obj runtime.Object) field.ErrorList {
					s := obj.(*resourcev1.ResourceSlice)
					p := field.NewPath("spec")
					errs := csiDriverName(p.Child("driver"), s.Spec.Driver)
					if s.Spec.Pool.Name == "" {
						errs = append(errs, field.Required(p.Child("pool", "name"), ""))
					}
					n := 0
					for _, set := range []bool{s.Spec.NodeName != nil && *s.Spec.NodeName != "", s.Spec.NodeSelector != nil,
						s.Spec.AllNodes != nil && *s.Spec.AllNodes, s.Spec.PerDeviceNodeSelection != nil && *s.Spec.PerDeviceNodeSelection} {
						if set {
							n++
						}
					}
					if n != 1 {
						errs = append(errs, field.Required(p, "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"))
					}
					for i, d := range s.Spec.Devices {
						errs = append(errs, dnsLabel(p.Child("devices").Index(i).Child("name"), d.Name)...)
					}
					return errs
				},
				validateOnUpdate: true,
			}, sliceFields),
		stored(dra, "deviceclasses", "DeviceClass", nil, false, false, func() runtime.Object { return &resourcev1.DeviceClass{} },
			func() runtime.Object { return &resourcev1.DeviceClassList{} }, &strategy{}),
		stored(dra, "devicetaintrules", "DeviceTaintRule", nil, false, true, func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
			func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} }, &strategy{
				prepareCreate: func(obj runtime.Object) {
					obj.(*resourcev1.DeviceTaintRule).Status = resourcev1.DeviceTaintRuleStatus{}
				},
				prepareUpdate: func(obj, old runtime.Object) {
					obj.(*resourcev1.DeviceTaintRule).Status = old.(*resourcev1.DeviceTaintRule).Status
				},
				validate: func(obj runtime.Object) field.ErrorList {
					t := obj.(*resourcev1.DeviceTaintRule).Spec.Taint
					p := field.NewPath("spec", "taint")
					var errs field.ErrorList
					for _, msg := range validation.IsQualifiedName(t.Key) {
						errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
					}
					switch t.Effect {
					case resourcev1.DeviceTaintEffectNoSchedule, resourcev1.DeviceTaintEffectNoExecute, resourcev1.DeviceTaintEffectNone:
					default:
						errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{
							string(resourcev1.DeviceTaintEffectNoSchedule), string(resourcev1.DeviceTaintEffectNoExecute), string(resourcev1.DeviceTaintEffectNone)}))
					}
					return errs
				},
				validateOnUpdate: true,
			}),
	}
}

// validateClaimSpec checks a ResourceClaim spec's request names (DNS labels), which pods
// and allocations refer to.
func validateClaimSpec(spec *resourcev1.ResourceClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range spec.Devices.Requests {
		errs = append(errs, dnsLabel(p.Child("devices", "requests").Index(i).Child("name"), r.Name)...)
	}
	return errs
}

// inCategory adds the resource to a category (such as "all").
func inCategory(c string) func(*registry.Resource) {
	return func(r *registry.Resource) { r.Categories = append(r.Categories, c) }
}

// nameIs validates object names with fn instead of as DNS subdomains.
func nameIs(fn func(*field.Path, string) field.ErrorList) func(*registry.Resource) {
	return func(r *registry.Resource) {
		r.ValidateName = func(name string, prefix bool) []string {
			if prefix {
				name = strings.TrimSuffix(name, "-")
			}
			var msgs []string
			for _, e := range fn(field.NewPath("metadata", "name"), name) {
				msgs = append(msgs, e.Detail)
			}
			return msgs
		}
	}
}

// sliceFields adds the field selectors kube-scheduler and kubelets list ResourceSlices by.
func sliceFields(r *registry.Resource) {
	r.FieldLabels = []string{"spec.nodeName", "spec.driver"}
	r.GetAttrs = func(obj runtime.Object) (labels.Set, fields.Set, error) {
		s := obj.(*resourcev1.ResourceSlice)
		return labels.Set(s.Labels), fields.Set{"metadata.name": s.Name, "spec.nodeName": ptr.Deref(s.Spec.NodeName, ""), "spec.driver": s.Spec.Driver}, nil
	}
}

// createOnUpdate lets a PUT create the object (Kubernetes' AllowCreateOnUpdate).
func createOnUpdate(r *registry.Resource) { r.AllowCreateOnUpdate = true }

// conditionalUpdateOnly refuses a PUT without metadata.resourceVersion, as Kubernetes'
// strategies that return false from AllowUnconditionalUpdate do.
func conditionalUpdateOnly(r *registry.Resource) { r.AllowUnconditionalUpdate = false }

// stored defines a plainly stored resource with default Table columns, and a status
// subresource (and metadata.generation tracking) when withStatus.
func stored(gv schema.GroupVersion, name, kind string, short []string, namespaced, withStatus bool, newFn, newList func() runtime.Object,
	st registry.Strategy, opts ...func(*registry.Resource)) Definition {
	r := &registry.Resource{
		AllowUnconditionalUpdate: true, GroupVersion: gv, Name: name, SingularName: strings.ToLower(kind), Kind: kind, ListKind: kind + "List",
		ShortNames: short, Namespaced: namespaced, NewFunc: newFn, NewListFunc: newList, Strategy: st,
		TracksGeneration: withStatus,
	}
	for _, o := range opts {
		o(r)
	}
	d := Definition{Resource: r}
	if withStatus {
		r.StatusStrategy = statusOnly()
		d.Subresources = statusSub
	}
	return d
}

// defaultService applies Kubernetes' v1 Service defaults.
func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && s.Spec.SessionAffinityConfig == nil {
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)}}
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.InternalTrafficPolicy == nil {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) && s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

// validateService checks the type, ports and selector of a Service.
func validateService(s *corev1.Service) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(p.Child("ports"), ""))
		}
	case corev1.ServiceTypeExternalName:
		for _, msg := range validation.IsDNS1123Subdomain(s.Spec.ExternalName) {
			errs = append(errs, field.Invalid(p.Child("externalName"), s.Spec.ExternalName, msg))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Spec.Type, []string{string(corev1.ServiceTypeClusterIP),
			string(corev1.ServiceTypeNodePort), string(corev1.ServiceTypeLoadBalancer), string(corev1.ServiceTypeExternalName)}))
	}
	names := map[string]bool{}
	for i, port := range s.Spec.Ports {
		pp := p.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && port.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if port.Name != "" {
			errs = append(errs, dnsLabel(pp.Child("name"), port.Name)...)
			if names[port.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(port.Port)) {
			errs = append(errs, field.Invalid(pp.Child("port"), port.Port, msg))
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
		}
	}
	errs = append(errs, validateLabelMap(s.Spec.Selector, p.Child("selector"))...)
	return errs
}

// validatePDB requires exactly one of minAvailable and maxUnavailable, non-negative.
func validatePDB(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(p, pdb.Spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	for name, v := range map[string]*intstr.IntOrString{"minAvailable": pdb.Spec.MinAvailable, "maxUnavailable": pdb.Spec.MaxUnavailable} {
		if v == nil {
			continue
		}
		if v.Type == intstr.Int && v.IntVal < 0 {
			errs = append(errs, field.Invalid(p.Child(name), v.IntVal, "must be greater than or equal to 0"))
		}
		if v.Type == intstr.String {
			if _, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false); err != nil || !strings.HasSuffix(v.StrVal, "%") {
				errs = append(errs, field.Invalid(p.Child(name), v.StrVal, "must be an integer or a percentage"))
			}
		}
	}
	if pdb.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil {
			errs = append(errs, field.Invalid(p.Child("selector"), pdb.Spec.Selector, err.Error()))
		}
	}
	return errs
}

// validateAccessModes requires at least one known access mode.
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	if len(modes) == 0 {
		return field.ErrorList{field.Required(p, "at least 1 access mode is required")}
	}
	known := []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}
	var errs field.ErrorList
	for i, m := range modes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod:
		default:
			errs = append(errs, field.NotSupported(p.Index(i), m, known))
		}
	}
	return errs
}

// csiDriverName is Kubernetes' rule for CSI driver names: at most 63 characters, a DNS
// subdomain once lower-cased.
func csiDriverName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(p, "", 63))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// validateLabelMap checks the keys and values of a label map such as a selector.
func validateLabelMap(m map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range m {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(p.Key(k), k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Key(k), v, msg))
		}
	}
	return errs
}

// defaultStatefulSet applies Kubernetes' apps/v1 StatefulSet defaults.
func defaultStatefulSet(s *appsv1.StatefulSet) {
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = ptr.To[int32](1)
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		}
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == "" {
		s.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == "" {
		s.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	defaultPodSpec(&s.Spec.Template.Spec)
	for i := range s.Spec.VolumeClaimTemplates {
		if s.Spec.VolumeClaimTemplates[i].Spec.VolumeMode == nil {
			s.Spec.VolumeClaimTemplates[i].Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
	}
}
