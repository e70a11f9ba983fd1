// Package quota measures what objects cost against a ResourceQuota — the usage of a pod
// or of any counted object, scope matching, and resource-list arithmetic — for both the
// ResourceQuota admission plugin and the quota controller, so that both charge alike.
package quota

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
)

// classicNames are the object-count names quota had before count/<resource>.
var classicNames = map[schema.GroupResource]corev1.ResourceName{
	{Resource: "pods"}:                   corev1.ResourcePods,
	{Resource: "configmaps"}:             corev1.ResourceConfigMaps,
	{Resource: "secrets"}:                corev1.ResourceSecrets,
	{Resource: "services"}:               corev1.ResourceServices,
	{Resource: "persistentvolumeclaims"}: corev1.ResourcePersistentVolumeClaims,
	{Resource: "replicationcontrollers"}: corev1.ResourceReplicationControllers,
	{Resource: "resourcequotas"}:         corev1.ResourceQuotas,
}

// podComputeNames are the compute names a pod is charged for.
var podComputeNames = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
)

// constrainedNames are the compute names every container must state when a quota limits
// them (Kubernetes' backward-compatible rule for cpu and memory).
var constrainedNames = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory,
)

// servicesGR is the group resource of Services.
var servicesGR = schema.GroupResource{Resource: "services"}

// ServiceNames are the names a Service is charged for besides its count: the node ports
// it opens and whether it asks for a load balancer.
var ServiceNames = sets.New(corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// CountName is the count/<resource>[.<group>] name of a resource.
func CountName(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// ResourceOf returns the resource a quota resource name counts objects of: a classic
// name or count/<resource>[.<group>]. Compute names report false.
func ResourceOf(name corev1.ResourceName) (schema.GroupResource, bool) {
	for gr, n := range classicNames {
		if n == name {
			return gr, true
		}
	}
	rest, ok := strings.CutPrefix(string(name), "count/")
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	res, group, _ := strings.Cut(rest, ".")
	return schema.GroupResource{Group: group, Resource: res}, true
}

// PluginMemory is the quota resource of the guest memory a namespace's WasmPlugins may
// hold: each plugin costs its memory per instance times its instances.
const PluginMemory corev1.ResourceName = "wasmplane.io/plugin-memory"

// WasmPlugins is the group resource of namespaced WASM plugins.
var WasmPlugins = schema.GroupResource{Group: wasmv1.GroupName, Resource: "wasmplugins"}

// Names returns every quota resource name objects of gr may be charged for.
func Names(gr schema.GroupResource) sets.Set[corev1.ResourceName] {
	out := sets.New(CountName(gr))
	if n, ok := classicNames[gr]; ok {
		out.Insert(n)
	}
	switch gr {
	case schema.GroupResource{Resource: "pods"}:
		out = out.Union(podComputeNames)
	case WasmPlugins:
		out.Insert(PluginMemory)
	case servicesGR:
		out = out.Union(ServiceNames)
	case pvcsGR:
		out.Insert(corev1.ResourceRequestsStorage)
	}
	return out
}

// claimsGR is the group resource of DRA ResourceClaims.
var claimsGR = schema.GroupResource{Group: resourcev1.GroupName, Resource: "resourceclaims"}

// ChargesClaims reports whether ResourceClaims are charged for the quota resource name
// beyond their count: <device class>.deviceclass.resource.k8s.io/devices, open-ended.
func ChargesClaims(name corev1.ResourceName) bool {
	class, ok := strings.CutSuffix(string(name), corev1.ResourceClaimsPerClass)
	return ok && class != ""
}

// ClaimUsage is what a ResourceClaim costs besides its count, as Kubernetes' claim
// evaluator charges it: per device class, the devices its requests may be allocated —
// the count asked for, the worst case for "All", and for a list of alternatives the most
// any one of them could take of each class.
func ClaimUsage(claim *resourcev1.ResourceClaim) corev1.ResourceList {
	out := corev1.ResourceList{}
	devices := func(mode resourcev1.DeviceAllocationMode, count int64) int64 {
		switch mode {
		case resourcev1.DeviceAllocationModeExactCount, "":
			return max(count, 1) // the API defaults the count to 1
		case resourcev1.DeviceAllocationModeAll:
			return resourcev1.AllocationResultsMaxSize
		}
		return 0 // an unknown mode is not charged
	}
	add := func(class string, n int64) {
		name := corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
		q := out[name]
		q.Add(*resource.NewQuantity(n, resource.DecimalSI))
		out[name] = q
	}
	for _, r := range claim.Spec.Devices.Requests {
		switch {
		case len(r.FirstAvailable) > 0:
			most := map[string]int64{}
			for _, sub := range r.FirstAvailable {
				most[sub.DeviceClassName] = max(most[sub.DeviceClassName], devices(sub.AllocationMode, sub.Count))
			}
			for class, n := range most {
				add(class, n)
			}
		case r.Exactly != nil:
			add(r.Exactly.DeviceClassName, devices(r.Exactly.AllocationMode, r.Exactly.Count))
		}
	}
	return out
}

// pvcsGR is the group resource of PersistentVolumeClaims.
var pvcsGR = schema.GroupResource{Resource: "persistentvolumeclaims"}

// storageClassSuffix ends the per-storage-class quota names:
// <class>.storageclass.storage.k8s.io/persistentvolumeclaims and /requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// ChargesPVCs reports whether PersistentVolumeClaims are charged for the quota resource
// name beyond their count: requests.storage, and the count and storage of one storage
// class, which are open-ended.
func ChargesPVCs(name corev1.ResourceName) bool {
	if name == corev1.ResourceRequestsStorage {
		return true
	}
	class, res, ok := strings.Cut(string(name), storageClassSuffix)
	return ok && class != "" && (res == string(corev1.ResourcePersistentVolumeClaims) || res == string(corev1.ResourceRequestsStorage))
}

// PVCUsage is what a PersistentVolumeClaim costs besides its count, as Kubernetes'
// claim evaluator charges it: its storage (the larger of the request and what a resize
// allocated) under requests.storage, and, with a storage class, the count and storage
// again under that class's names.
func PVCUsage(pvc *corev1.PersistentVolumeClaim) corev1.ResourceList {
	out := corev1.ResourceList{}
	storage, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if a, aok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; aok && (!ok || a.Cmp(storage) > 0) {
		storage, ok = a, true
	}
	if ok {
		out[corev1.ResourceRequestsStorage] = storage.DeepCopy()
	}
	if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
		class := *pvc.Spec.StorageClassName + storageClassSuffix
		out[corev1.ResourceName(class+string(corev1.ResourcePersistentVolumeClaims))] = *resource.NewQuantity(1, resource.DecimalSI)
		if ok {
			out[corev1.ResourceName(class+string(corev1.ResourceRequestsStorage))] = storage.DeepCopy()
		}
	}
	return out
}

// ServiceUsage is what a Service costs in ServiceNames, as Kubernetes' service evaluator
// counts it: a NodePort Service one node port per port, a LoadBalancer Service one load
// balancer and (unless it allocates none) one node port per port. Zero costs are left out.
func ServiceUsage(svc *corev1.Service) corev1.ResourceList {
	out := corev1.ResourceList{}
	ports := *resource.NewQuantity(int64(len(svc.Spec.Ports)), resource.DecimalSI)
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = ports
	case corev1.ServiceTypeLoadBalancer:
		out[corev1.ResourceServicesLoadBalancers] = *resource.NewQuantity(1, resource.DecimalSI)
		if svc.Spec.AllocateLoadBalancerNodePorts == nil || *svc.Spec.AllocateLoadBalancerNodePorts {
			out[corev1.ResourceServicesNodePorts] = ports
		}
	}
	for n, q := range out {
		if q.IsZero() {
			delete(out, n)
		}
	}
	return out
}

// growth is what after costs more than before, over the names charged keeps.
func growth(before, after corev1.ResourceList, charged func(corev1.ResourceName) bool) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range after {
		if !charged(n) {
			continue
		}
		q.Sub(before[n])
		if q.Sign() > 0 {
			out[n] = q
		}
	}
	return out
}

// PluginMemoryOf is what a WasmPlugin costs in PluginMemory.
func PluginMemoryOf(p *wasmv1.WasmPlugin) resource.Quantity {
	return *resource.NewQuantity(wasmv1.MemoryBytes(p.Spec.Limits), resource.BinarySI)
}

// UpdateUsage is what an update of an object of gr adds to its namespace's usage: a
// WasmPlugin whose limits grow costs the growth in PluginMemory, a Service the node ports
// and load balancer it gains (a ClusterIP Service turned NodePort); nothing else changes
// its cost on update.
func UpdateUsage(gr schema.GroupResource, old, obj runtime.Object) corev1.ResourceList {
	if os, ok := old.(*corev1.Service); ok && gr == servicesGR {
		ns, ok := obj.(*corev1.Service)
		if !ok {
			return nil
		}
		return growth(ServiceUsage(os), ServiceUsage(ns), func(corev1.ResourceName) bool { return true })
	}
	if op, ok := old.(*corev1.PersistentVolumeClaim); ok && gr == pvcsGR {
		np, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return nil
		}
		// A resize charges the storage it adds, not the claim again.
		return growth(PVCUsage(op), PVCUsage(np), func(n corev1.ResourceName) bool {
			return strings.HasSuffix(string(n), string(corev1.ResourceRequestsStorage))
		})
	}
	op, ok1 := old.(*wasmv1.WasmPlugin)
	np, ok2 := obj.(*wasmv1.WasmPlugin)
	if gr != WasmPlugins || !ok1 || !ok2 {
		return nil
	}
	grow := PluginMemoryOf(np)
	grow.Sub(PluginMemoryOf(op))
	if grow.Sign() <= 0 {
		return nil
	}
	return corev1.ResourceList{PluginMemory: grow}
}

// Usage is what one object of gr costs. Every object costs one count/<resource>; a pod
// also costs "pods" and its compute resources unless it is terminal (Kubernetes' rule);
// a Service its ServiceUsage.
func Usage(gr schema.GroupResource, obj runtime.Object, now time.Time) corev1.ResourceList {
	out := corev1.ResourceList{CountName(gr): *resource.NewQuantity(1, resource.DecimalSI)}
	if pod, ok := obj.(*corev1.Pod); ok && gr.Resource == "pods" && gr.Group == "" {
		if !PodCounts(pod, now) {
			return out
		}
		out[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		req, lim := podAggregate(pod, requestsOf), podAggregate(pod, limitsOf)
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			if q, ok := req[n]; ok {
				out[n] = q.DeepCopy()
				out[corev1.ResourceName("requests."+string(n))] = q.DeepCopy()
			}
			if q, ok := lim[n]; ok {
				out[corev1.ResourceName("limits."+string(n))] = q.DeepCopy()
			}
		}
		// Huge pages are charged under both names, extended resources under requests.
		// only, as Kubernetes' pod evaluator does.
		for n, q := range req {
			switch {
			case strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix):
				out[n] = q.DeepCopy()
				out[corev1.DefaultResourceRequestsPrefix+n] = q.DeepCopy()
			case extendedResource(n):
				out[corev1.DefaultResourceRequestsPrefix+n] = q.DeepCopy()
			}
		}
		return out
	}
	if p, ok := obj.(*wasmv1.WasmPlugin); ok && gr == WasmPlugins {
		out[PluginMemory] = PluginMemoryOf(p)
	}
	if svc, ok := obj.(*corev1.Service); ok && gr == servicesGR {
		maps.Copy(out, ServiceUsage(svc))
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && gr == pvcsGR {
		maps.Copy(out, PVCUsage(pvc))
	}
	if claim, ok := obj.(*resourcev1.ResourceClaim); ok && gr == claimsGR {
		maps.Copy(out, ClaimUsage(claim))
	}
	if n, ok := classicNames[gr]; ok {
		out[n] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	return out
}

// ChargesPods reports whether pods are charged for the quota resource name: the names of
// Names, and the requests of extended resources and huge pages, which are open-ended.
func ChargesPods(name corev1.ResourceName) bool {
	return Names(schema.GroupResource{Resource: "pods"}).Has(name) || podRequestName(name)
}

// podRequestName reports whether name is requests.<extended resource> or
// [requests.]hugepages-<size>, the forms Kubernetes' pod evaluator charges them under.
func podRequestName(name corev1.ResourceName) bool {
	rest, requests := strings.CutPrefix(string(name), corev1.DefaultResourceRequestsPrefix)
	if strings.HasPrefix(rest, corev1.ResourceHugePagesPrefix) {
		return true
	}
	return requests && extendedResource(corev1.ResourceName(rest))
}

// extendedResource is Kubernetes' rule for an extended resource name: a domain-qualified
// name outside kubernetes.io that stays a qualified name under the requests. prefix.
func extendedResource(name corev1.ResourceName) bool {
	n := string(name)
	if !strings.Contains(n, "/") || strings.Contains(n, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+n)) == 0
}

// PodCounts reports whether a pod still uses quota: not terminal, and not stuck
// terminating past its grace period (a lost node must not hold a namespace's quota).
func PodCounts(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		if now.After(pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)) {
			return false
		}
	}
	return true
}

// Matches reports whether quota q applies to obj of gr: a quota with scopes or a scope
// selector applies to pods, and to PersistentVolumeClaims (by the VolumeAttributesClass
// scope, as Kubernetes' claim evaluator), and only to those its scopes select.
func Matches(q *corev1.ResourceQuota, gr schema.GroupResource, obj runtime.Object) bool {
	var selectors []corev1.ScopedResourceSelectorRequirement
	for _, s := range q.Spec.Scopes {
		selectors = append(selectors, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if q.Spec.ScopeSelector != nil {
		selectors = append(selectors, q.Spec.ScopeSelector.MatchExpressions...)
	}
	if len(selectors) == 0 {
		return true
	}
	var matches func(corev1.ScopedResourceSelectorRequirement) bool
	switch o := obj.(type) {
	case *corev1.Pod:
		if gr.Resource != "pods" {
			return false
		}
		matches = func(s corev1.ScopedResourceSelectorRequirement) bool { return podMatchesScope(o, s) }
	case *corev1.PersistentVolumeClaim:
		if gr != pvcsGR {
			return false
		}
		matches = func(s corev1.ScopedResourceSelectorRequirement) bool { return pvcMatchesScope(o, s) }
	default:
		return false
	}
	for _, s := range selectors {
		if !matches(s) {
			return false
		}
	}
	return true
}

// Scoped reports whether q has scopes or a scope selector.
func Scoped(q *corev1.ResourceQuota) bool {
	return len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil
}

// pvcMatchesScope is Kubernetes' claim evaluator's scope match: only the
// VolumeAttributesClass scope selects claims, by every class the claim refers to (the one
// it asks for, the one it has and the one it is being modified to); a claim matches when
// the selector matches one of them, or, referring to none, when it matches no class.
func pvcMatchesScope(pvc *corev1.PersistentVolumeClaim, s corev1.ScopedResourceSelectorRequirement) bool {
	if s.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false
	}
	names := volumeAttributesClassNames(pvc)
	in := func(name string) bool { return slices.Contains(s.Values, name) }
	switch s.Operator {
	case corev1.ScopeSelectorOpExists:
		return len(names) > 0
	case corev1.ScopeSelectorOpDoesNotExist:
		return len(names) == 0
	case corev1.ScopeSelectorOpIn:
		return slices.ContainsFunc(names, in)
	case corev1.ScopeSelectorOpNotIn:
		return len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return !in(n) })
	}
	return false
}

// volumeAttributesClassNames are the VolumeAttributesClasses a claim refers to.
func volumeAttributesClassNames(pvc *corev1.PersistentVolumeClaim) []string {
	names := sets.New[string]()
	if c := pvc.Spec.VolumeAttributesClassName; c != nil && *c != "" {
		names.Insert(*c)
	}
	if c := pvc.Status.CurrentVolumeAttributesClassName; c != nil && *c != "" {
		names.Insert(*c)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil && m.TargetVolumeAttributesClassName != "" {
		names.Insert(m.TargetVolumeAttributesClassName)
	}
	return sets.List(names)
}

// PersistentVolumeClaims is the group resource of PersistentVolumeClaims.
var PersistentVolumeClaims = pvcsGR

func podMatchesScope(pod *corev1.Pod, s corev1.ScopedResourceSelectorRequirement) bool {
	terminating := pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod)
	case corev1.ResourceQuotaScopePriorityClass:
		v := pod.Spec.PriorityClassName
		switch s.Operator {
		case corev1.ScopeSelectorOpExists:
			return v != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return v == ""
		case corev1.ScopeSelectorOpIn:
			return sets.New(s.Values...).Has(v)
		case corev1.ScopeSelectorOpNotIn:
			return !sets.New(s.Values...).Has(v)
		}
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod)
	}
	return false
}

func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

func isBestEffort(pod *corev1.Pod) bool {
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[n]; ok && !q.IsZero() {
				return false
			}
			if q, ok := c.Resources.Limits[n]; ok && !q.IsZero() {
				return false
			}
		}
	}
	return true
}

// Matching returns the names among hard that objects of gr are charged for.
func Matching(gr schema.GroupResource, hard corev1.ResourceList) []corev1.ResourceName {
	names := Names(gr)
	pods := gr == schema.GroupResource{Resource: "pods"}
	var out []corev1.ResourceName
	for n := range hard {
		if names.Has(n) || pods && podRequestName(n) || gr == pvcsGR && ChargesPVCs(n) || gr == claimsGR && ChargesClaims(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// PodConstraints is Kubernetes' rule that when a quota limits cpu or memory every
// container states the matching request or limit.
func PodConstraints(required []corev1.ResourceName, pod *corev1.Pod) error {
	want := sets.New(required...).Intersection(constrainedNames)
	if want.Len() == 0 {
		return nil
	}
	missing := map[corev1.ResourceName]sets.Set[string]{}
	check := func(c *corev1.Container) {
		for n := range want {
			list, base := c.Resources.Requests, n
			switch {
			case strings.HasPrefix(string(n), "requests."):
				base = corev1.ResourceName(strings.TrimPrefix(string(n), "requests."))
			case strings.HasPrefix(string(n), "limits."):
				list, base = c.Resources.Limits, corev1.ResourceName(strings.TrimPrefix(string(n), "limits."))
			}
			if _, ok := list[base]; !ok {
				if missing[n] == nil {
					missing[n] = sets.New[string]()
				}
				missing[n].Insert(c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s for: %s", n, strings.Join(sets.List(missing[corev1.ResourceName(n)]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

// Mask keeps the entries of l named in names.
func Mask(l corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range names {
		if q, ok := l[n]; ok {
			out[n] = q.DeepCopy()
		}
	}
	return out
}

// Add returns a + b.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for n, q := range a {
		out[n] = q.DeepCopy()
	}
	for n, q := range b {
		v, ok := out[n]
		if !ok {
			out[n] = q.DeepCopy()
			continue
		}
		v.Add(q)
		out[n] = v
	}
	return out
}

// Exceeded returns the names in a that are above their value in limit.
func Exceeded(a, limit corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for n, q := range a {
		if l, ok := limit[n]; ok && q.Cmp(l) > 0 {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// NamesOf returns the names of a list, sorted.
func NamesOf(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Equal reports whether a and b hold the same names and quantities.
func Equal(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range a {
		if v, ok := b[n]; !ok || v.Cmp(q) != 0 {
			return false
		}
	}
	return true
}

// PrettyPrint formats a list as Kubernetes' quota errors do: "a=1,b=2", sorted.
func PrettyPrint(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, n := range NamesOf(l) {
		q := l[n]
		parts = append(parts, string(n)+"="+q.String())
	}
	return strings.Join(parts, ",")
}

func requestsOf(c *corev1.Container) corev1.ResourceList { return c.Resources.Requests }
func limitsOf(c *corev1.Container) corev1.ResourceList   { return c.Resources.Limits }

// podAggregate sums containers and sidecars, takes the max with each init container, and
// adds overhead, as Kubernetes' resource helpers do.
func podAggregate(pod *corev1.Pod, of func(*corev1.Container) corev1.ResourceList) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		total = Add(total, of(&pod.Spec.Containers[i]))
	}
	sidecars, initMax := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			total = Add(total, of(c))
			sidecars = Add(sidecars, of(c))
			initMax = maxOf(initMax, sidecars)
			continue
		}
		initMax = maxOf(initMax, Add(of(c), sidecars))
	}
	total = maxOf(total, initMax)
	for n, q := range pod.Spec.Overhead {
		if v, ok := total[n]; ok {
			v.Add(q)
			total[n] = v
		}
	}
	return total
}

func maxOf(a, b corev1.ResourceList) corev1.ResourceList {
	out := Add(a, nil)
	for n, q := range b {
		if v, ok := out[n]; !ok || q.Cmp(v) > 0 {
			out[n] = q.DeepCopy()
		}
	}
	return out
}

// PodRequests and PodLimits are a pod's effective requests and limits.
func PodRequests(pod *corev1.Pod) corev1.ResourceList { return podAggregate(pod, requestsOf) }

// PodLimits is PodRequests for limits.
func PodLimits(pod *corev1.Pod) corev1.ResourceList { return podAggregate(pod, limitsOf) }
