package admission

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// configurationResources are the objects that configure admission itself. Kubernetes never
// sends its admission configuration to webhooks, so that no webhook can make itself
// impossible to remove; wasmplane keeps its dynamic plugins and initializers away from
// these for the same reason. The admissionregistration.k8s.io types are listed before they
// are served so that they are covered the day they are.
var configurationResources = map[schema.GroupResource]bool{
	{Group: "wasmplane.io", Resource: "wasmplugins"}:                                       true,
	{Group: "wasmplane.io", Resource: "clusterwasmplugins"}:                                true,
	{Group: "wasmplane.io", Resource: "wasmmodules"}:                                       true,
	{Group: "admissionregistration.k8s.io", Resource: "initializerconfigurations"}:         true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}:   true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:     true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}:       true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}: true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:         true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}:   true,
}

// IsAdmissionConfiguration reports whether gr configures admission (plugins, modules,
// initializer, webhook and policy configurations): such objects, and all their
// subresources, are never sent to dynamic admission plugins or initializers.
func IsAdmissionConfiguration(gr schema.GroupResource) bool {
	return configurationResources[gr]
}

// cleanupUsers are the control plane's identities that delete a namespace's contents and
// its garbage: the API server's in-process components (the loopback identity), a separate
// controller manager under the name Kubernetes gives it, and Kubernetes' per-controller
// service accounts of the namespace controller and the garbage collector. None can be
// obtained by a tenant: client certificates need the cluster CA, and service account
// tokens of kube-system need rights there.
var cleanupUsers = []string{
	"system:apiserver",
	"system:kube-controller-manager",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:serviceaccount:kube-system:generic-garbage-collector",
}

// IsCleanup reports whether a request is the control plane cleaning up: a delete by one of
// its identities, or one of its updates that only removes finalizers (how the garbage
// collector releases an owner after a foreground or orphaning delete). A tenant's
// namespaced plugin never sees these: it may govern what its own users do, but it must
// not be able to keep the cluster from deleting its namespace or collecting its garbage.
func IsCleanup(a *Attributes) bool {
	if !slices.Contains(cleanupUsers, a.User.Name) {
		return false
	}
	switch a.Operation {
	case Delete:
		return true
	case Update:
		return OnlyFinalizersRemoved(a.OldObject, a.Object)
	}
	return false
}

// OnlyFinalizersRemoved reports whether obj is old with some finalizers removed and
// nothing else changed (the resourceVersion and managedFields a write always touches
// aside).
func OnlyFinalizersRemoved(old, obj runtime.Object) bool {
	if old == nil || obj == nil {
		return false
	}
	om, err1 := meta.Accessor(old)
	nm, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil {
		return false
	}
	of, nf := om.GetFinalizers(), nm.GetFinalizers()
	if len(nf) >= len(of) {
		return false
	}
	for _, f := range nf {
		if !slices.Contains(of, f) {
			return false
		}
	}
	oc, nc := old.DeepCopyObject(), obj.DeepCopyObject()
	for _, o := range []runtime.Object{oc, nc} {
		m, _ := meta.Accessor(o)
		m.SetFinalizers(nil)
		m.SetResourceVersion("")
		m.SetManagedFields(nil)
	}
	return equality.Semantic.DeepEqual(oc, nc)
}
