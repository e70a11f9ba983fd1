package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/core/authn"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// PodNodeNameIndex is the pod informer index (by spec.nodeName) the node authorizer reads.
const PodNodeNameIndex = "spec.nodeName"

// NodeAuthorizer is Kubernetes' node authorizer (with the NodeRestriction checks that can
// be made without the request body): a kubelet, user system:node:NAME in group
// system:nodes, may read and write its own Node, Lease and the pods bound to it, and read
// the secrets, configmaps, PVCs and ServiceAccounts those pods reference. Anything else is
// NoOpinion for a node, so RBAC may still grant it; other users are NoOpinion.
type NodeAuthorizer struct {
	pods cache.Indexer
}

// NewNodeAuthorizer returns a node authorizer over a pod informer, adding the
// spec.nodeName index to it; call it before the informer starts.
func NewNodeAuthorizer(pods cache.SharedIndexInformer) (*NodeAuthorizer, error) {
	if _, ok := pods.GetIndexer().GetIndexers()[PodNodeNameIndex]; !ok {
		err := pods.AddIndexers(cache.Indexers{PodNodeNameIndex: func(obj any) ([]string, error) {
			if p := refsOf(obj); p != nil && p.NodeName != "" {
				return []string{p.NodeName}, nil
			}
			return nil, nil
		}})
		if err != nil {
			return nil, fmt.Errorf("adding the pod index %s: %w", PodNodeNameIndex, err)
		}
	}
	return &NodeAuthorizer{pods: pods.GetIndexer()}, nil
}

// NodeName returns the node a user is the kubelet of, if any.
func NodeName(u *authn.User) (string, bool) {
	if u == nil || !u.InGroup(authn.GroupNodes) {
		return "", false
	}
	name, ok := strings.CutPrefix(u.Name, authn.NodeUserPrefix)
	return name, ok
}

// nodeStaticRules are the system:node permissions that are not tied to one object and so
// are granted as plain rules (Kubernetes' NodeRules for resources the graph does not cover).
var nodeStaticRules = []rbacv1.PolicyRule{
	{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}},
	{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews", "localsubjectaccessreviews"}},
	{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services"}},
	{Verbs: []string{"create", "update", "patch"}, APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}},
	{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"endpoints"}},
	{Verbs: []string{"create", "get", "list", "watch"}, APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}},
	{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"storage.k8s.io"}, Resources: []string{"csidrivers"}},
	{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"node.k8s.io"}, Resources: []string{"runtimeclasses"}},
}

// Authorize implements Authorizer.
func (n *NodeAuthorizer) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	node, ok := NodeName(a.User)
	if !ok {
		return DecisionNoOpinion, "", nil
	}
	if node == "" {
		return DecisionNoOpinion, fmt.Sprintf("unknown node for user %q", a.User.Name), nil
	}
	if a.ResourceRequest {
		switch {
		case a.APIGroup == "" && a.Resource == "nodes":
			return n.node(node, a)
		case a.APIGroup == "" && a.Resource == "pods":
			return n.pod(node, a)
		case a.APIGroup == "" && (a.Resource == "secrets" || a.Resource == "configmaps"):
			return n.readReferenced(node, a, true)
		case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
			return n.readReferenced(node, a, false)
		case a.APIGroup == "" && a.Resource == "serviceaccounts":
			return n.serviceAccount(node, a)
		case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
			return n.lease(node, a)
		}
	}
	if RulesAllow(a, nodeStaticRules...) {
		return DecisionAllow, "", nil
	}
	return DecisionNoOpinion, "", nil
}

func (n *NodeAuthorizer) node(node string, a Attributes) (Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create":
			// The name is in the body, which an authorizer does not see; creating another
			// node's object is for admission (NodeRestriction) to refuse.
			return DecisionAllow, "", nil
		case "get", "list", "watch", "update", "patch":
			switch a.Name {
			case node:
				return DecisionAllow, "", nil
			case "":
				return DecisionNoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			}
			return DecisionNoOpinion, fmt.Sprintf("node '%s' cannot access '%s', only its own Node object", node, a.Name), nil
		}
	case "status":
		switch a.Verb {
		case "get", "update", "patch":
			if a.Name == node {
				return DecisionAllow, "", nil
			}
			return DecisionNoOpinion, fmt.Sprintf("node '%s' can only update its own Node status", node), nil
		}
	}
	return DecisionNoOpinion, "", nil
}

func (n *NodeAuthorizer) pod(node string, a Attributes) (Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "list", "watch":
			// Kubelets list with a spec.nodeName field selector that an authorizer does not
			// see; Kubernetes' system:node rules allow pod list/watch for the same reason.
			return DecisionAllow, "", nil
		case "get", "delete":
			return n.boundPod(node, a)
		}
	case "status":
		switch a.Verb {
		case "get", "update", "patch":
			return n.boundPod(node, a)
		}
	}
	return DecisionNoOpinion, "", nil
}

// boundPod allows a request about one pod bound to node.
func (n *NodeAuthorizer) boundPod(node string, a Attributes) (Decision, string, error) {
	if a.Name == "" {
		return DecisionNoOpinion, "No Object name found", nil
	}
	obj, exists, err := n.pods.GetByKey(a.Namespace + "/" + a.Name)
	if err != nil {
		return DecisionNoOpinion, "", fmt.Errorf("reading pod %s/%s: %w", a.Namespace, a.Name, err)
	}
	if exists {
		if p := refsOf(obj); p != nil && p.NodeName == node {
			return DecisionAllow, "", nil
		}
	}
	return DecisionNoOpinion, noRelationship(node), nil
}

func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// readReferenced allows get (and single-object list/watch for secrets and configmaps) of
// an object referenced by a pod bound to node.
func (n *NodeAuthorizer) readReferenced(node string, a Attributes, listable bool) (Decision, string, error) {
	switch {
	case a.Verb == "get", listable && (a.Verb == "list" || a.Verb == "watch"):
	default:
		return DecisionNoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return DecisionNoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return DecisionNoOpinion, "can only read namespaced object of this type", nil
	}
	if a.Name == "" {
		return DecisionNoOpinion, "No Object name found", nil
	}
	return n.referenced(node, a)
}

func (n *NodeAuthorizer) serviceAccount(node string, a Attributes) (Decision, string, error) {
	switch {
	case a.Verb == "get" && a.Subresource == "":
		if a.Name == "" {
			return DecisionNoOpinion, "No Object name found", nil
		}
		return n.referenced(node, a)
	case a.Verb == "create" && a.Subresource == "token":
		if a.Name == "" {
			return DecisionNoOpinion, "can only create tokens for individual service accounts", nil
		}
		return n.referenced(node, a)
	}
	return DecisionNoOpinion, "can only get service accounts or create tokens for them", nil
}

func (n *NodeAuthorizer) lease(node string, a Attributes) (Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return DecisionNoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.Namespace != corev1.NamespaceNodeLease {
		return DecisionNoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease), nil
	}
	// A create carries its name in the body only.
	if a.Verb != "create" && a.Name != node {
		return DecisionNoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return DecisionAllow, "", nil
}

// referenced allows a when a pod bound to node, in a's namespace, references the object.
func (n *NodeAuthorizer) referenced(node string, a Attributes) (Decision, string, error) {
	objs, err := n.pods.ByIndex(PodNodeNameIndex, node)
	if err != nil {
		return DecisionNoOpinion, "", fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	for _, obj := range objs {
		p := refsOf(obj)
		if p == nil || p.Namespace != a.Namespace {
			continue
		}
		if p.references(a.Resource, a.Name) {
			return DecisionAllow, "", nil
		}
	}
	return DecisionNoOpinion, noRelationship(node), nil
}

// PodRefs is what the node authorizer keeps of a pod: its identity, node, service
// account and the names of the secrets, configmaps and claims it references. The API
// server holds one per pod beside its watch cache, so it is small: at 150,000 pods a
// trimmed *corev1.Pod (a full-size struct, plus the volumes it kept) was ≈ 2 KB a pod.
type PodRefs struct {
	// ObjectMeta holds only the name, namespace and resourceVersion (the informer's keys).
	metav1.ObjectMeta
	NodeName string
	// ServiceAccount is spec.serviceAccountName, "default" when empty.
	ServiceAccount string
	// Secrets, ConfigMaps and Claims are the names of the objects of each kind the pod
	// references, a claim of a generic ephemeral volume as <pod>-<volume>.
	Secrets, ConfigMaps, Claims []string
}

// refsOf returns what the authorizer reads of a pod informer's object: a *PodRefs as
// TrimPod stored it, or one made from an untrimmed *corev1.Pod; nil for anything else.
func refsOf(obj any) *PodRefs {
	switch p := obj.(type) {
	case *PodRefs:
		return p
	case *corev1.Pod:
		return podRefs(p)
	}
	return nil
}

// references reports whether the pod uses the object resource/name of its namespace.
func (p *PodRefs) references(resource, name string) bool {
	switch resource {
	case "secrets":
		return slices.Contains(p.Secrets, name)
	case "configmaps":
		return slices.Contains(p.ConfigMaps, name)
	case "persistentvolumeclaims":
		return slices.Contains(p.Claims, name)
	case "serviceaccounts":
		return p.ServiceAccount == name
	}
	return false
}

// podRefs reduces p to what the authorizer reads.
func podRefs(p *corev1.Pod) *PodRefs {
	r := &PodRefs{
		ObjectMeta:     metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, ResourceVersion: p.ResourceVersion},
		NodeName:       p.Spec.NodeName,
		ServiceAccount: p.Spec.ServiceAccountName,
	}
	if r.ServiceAccount == "" {
		r.ServiceAccount = "default"
	}
	add := func(list *[]string) func(string) {
		return func(name string) {
			if !slices.Contains(*list, name) {
				*list = append(*list, name)
			}
		}
	}
	visitPodSecrets(p, add(&r.Secrets))
	visitPodConfigMaps(p, add(&r.ConfigMaps))
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			add(&r.Claims)(v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add(&r.Claims)(p.Name + "-" + v.Name)
		}
	}
	return r
}

// GetObjectKind implements runtime.Object, so informer code that expects one (deep copies
// for its consistency checks) works on the trimmed form; it has no kind of its own.
func (p *PodRefs) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *PodRefs) DeepCopyObject() runtime.Object {
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Secrets, c.ConfigMaps, c.Claims = slices.Clone(p.Secrets), slices.Clone(p.ConfigMaps), slices.Clone(p.Claims)
	return &c
}

func allContainers(p *corev1.Pod) []corev1.Container {
	out := append([]corev1.Container{}, p.Spec.InitContainers...)
	out = append(out, p.Spec.Containers...)
	for _, e := range p.Spec.EphemeralContainers {
		out = append(out, corev1.Container{Env: e.Env, EnvFrom: e.EnvFrom})
	}
	return out
}

func visitPodSecrets(p *corev1.Pod, visit func(string)) {
	for _, s := range p.Spec.ImagePullSecrets {
		visit(s.Name)
	}
	for _, c := range allContainers(p) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				visit(e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				visit(e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			visit(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					visit(s.Secret.Name)
				}
			}
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			visit(v.CSI.NodePublishSecretRef.Name)
		case v.ISCSI != nil && v.ISCSI.SecretRef != nil:
			visit(v.ISCSI.SecretRef.Name)
		case v.RBD != nil && v.RBD.SecretRef != nil:
			visit(v.RBD.SecretRef.Name)
		case v.CephFS != nil && v.CephFS.SecretRef != nil:
			visit(v.CephFS.SecretRef.Name)
		case v.FlexVolume != nil && v.FlexVolume.SecretRef != nil:
			visit(v.FlexVolume.SecretRef.Name)
		case v.AzureFile != nil:
			visit(v.AzureFile.SecretName)
		}
	}
}

func visitPodConfigMaps(p *corev1.Pod, visit func(string)) {
	for _, c := range allContainers(p) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				visit(e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				visit(e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			visit(v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					visit(s.ConfigMap.Name)
				}
			}
		}
	}
}

// TrimPod is a transform for the node authorizer's pod informer: it stores a *PodRefs —
// only what the authorizer reads — so the API server does not hold a second copy of
// every pod beside its watch cache. Other objects pass unchanged.
func TrimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return podRefs(p), nil
	}
	return obj, nil
}
