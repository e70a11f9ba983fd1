package authz

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/wasmplane/wasmplane/core/authn"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// Labels, annotations and well-known names of the bootstrap policy, as Kubernetes spells them.
const (
	// BootstrappingLabel marks the default roles and bindings.
	BootstrappingLabel = "kubernetes.io/bootstrapping"
	// BootstrappingValue is BootstrappingLabel's value.
	BootstrappingValue = "rbac-defaults"
	// AggregateToAdmin, AggregateToEdit and AggregateToView label ClusterRoles whose rules
	// the admin, edit and view roles take in.
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
	// WasmplaneGroup is wasmplane's API group.
	WasmplaneGroup = "wasmplane.io"
)

var (
	verbsRead      = []string{"get", "list", "watch"}
	verbsWrite     = []string{"create", "update", "patch", "delete", "deletecollection"}
	verbsReadWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	verbsReadUpdt  = []string{"get", "list", "watch", "update", "patch"}
)

func rule(verbs []string, groups []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: slices.Clone(verbs), APIGroups: slices.Clone(groups), Resources: resources}
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: slices.Clone(verbs), NonResourceURLs: urls}
}

func g(groups ...string) []string { return groups }

func eventsRule() rbacv1.PolicyRule {
	return rule([]string{"create", "update", "patch"}, g("", "events.k8s.io"), "events")
}

func viewRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(verbsRead, g(""), "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
		rule(verbsRead, g(""), "limitranges", "resourcequotas", "bindings", "pods/status", "resourcequotas/status",
			"namespaces/status", "replicationcontrollers/status", "pods/log", "pods/trace"),
		rule(verbsRead, g(""), "namespaces"),
		rule(verbsRead, g("", "events.k8s.io"), "events"),
		rule(verbsRead, g("discovery.k8s.io"), "endpointslices"),
		rule(verbsRead, g("apps"), "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
			"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
			"replicasets", "replicasets/status", "replicasets/scale"),
		rule(verbsRead, g("autoscaling"), "horizontalpodautoscalers", "horizontalpodautoscalers/status"),
		rule(verbsRead, g("batch"), "jobs", "cronjobs", "cronjobs/status", "jobs/status"),
		rule(verbsRead, g("policy"), "poddisruptionbudgets", "poddisruptionbudgets/status"),
		rule(verbsRead, g("networking.k8s.io"), "networkpolicies", "ingresses", "ingresses/status"),
		rule(verbsRead, g("resource.k8s.io"), "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
		// wasmplane: namespaced plugins are part of an application; cluster plugins and the
		// module store are not (only cluster-admin reaches them).
		rule(verbsRead, g(WasmplaneGroup), "wasmplugins", "wasmplugins/status"),
	}
}

func editRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule(verbsRead, g(""), "pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
		rule([]string{"impersonate"}, g(""), "serviceaccounts"),
		rule(verbsWrite, g(""), "pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
		rule([]string{"create"}, g(""), "pods/eviction"),
		rule(verbsWrite, g(""), "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
			"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"),
		rule([]string{"create"}, g(""), "serviceaccounts/token"),
		rule(verbsWrite, g("", "events.k8s.io"), "events"),
		rule(verbsWrite, g("apps"), "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
			"deployments/rollback", "replicasets", "replicasets/scale"),
		rule(verbsWrite, g("autoscaling"), "horizontalpodautoscalers"),
		rule(verbsWrite, g("batch"), "jobs", "cronjobs"),
		rule(verbsWrite, g("policy"), "poddisruptionbudgets"),
		rule(verbsWrite, g("networking.k8s.io"), "networkpolicies", "ingresses"),
		rule(verbsWrite, g("resource.k8s.io"), "resourceclaims", "resourceclaimtemplates"),
		rule(verbsReadWrite, g("coordination.k8s.io"), "leases"),
		rule(verbsWrite, g(WasmplaneGroup), "wasmplugins"),
	}
}

// NodeRules are the system:node ClusterRole's rules. Kubernetes no longer binds the role
// (the node authorizer grants kubelets what they need); it is kept for compatibility.
func NodeRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		rule([]string{"create"}, g("authentication.k8s.io"), "tokenreviews"),
		rule([]string{"create"}, g("authorization.k8s.io"), "subjectaccessreviews", "localsubjectaccessreviews"),
		rule(verbsRead, g(""), "services"),
		rule([]string{"create", "get", "list", "watch"}, g(""), "nodes"),
		rule([]string{"update", "patch"}, g(""), "nodes/status"),
		rule([]string{"update", "patch"}, g(""), "nodes"),
		eventsRule(),
		rule(verbsRead, g(""), "pods"),
		rule([]string{"create", "delete"}, g(""), "pods"),
		rule([]string{"update", "patch"}, g(""), "pods/status"),
		rule([]string{"create"}, g(""), "pods/eviction"),
		rule([]string{"get", "list", "watch"}, g(""), "secrets", "configmaps"),
		rule([]string{"get"}, g(""), "persistentvolumeclaims", "persistentvolumes"),
		rule([]string{"get"}, g(""), "endpoints"),
		rule([]string{"create", "get", "list", "watch"}, g("certificates.k8s.io"), "certificatesigningrequests"),
		rule([]string{"get", "create", "update", "patch", "delete"}, g("coordination.k8s.io"), "leases"),
		rule([]string{"get"}, g("storage.k8s.io"), "volumeattachments"),
		rule([]string{"create"}, g(""), "serviceaccounts/token"),
		rule([]string{"get", "update", "patch"}, g(""), "persistentvolumeclaims/status"),
		rule(verbsRead, g("storage.k8s.io"), "csidrivers"),
		rule([]string{"get", "create", "update", "patch", "delete"}, g("storage.k8s.io"), "csinodes"),
		rule(verbsRead, g("node.k8s.io"), "runtimeclasses"),
	}
}

func aggregation(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

// ClusterRoles returns the default ClusterRoles (a fresh copy on every call), labelled
// kubernetes.io/bootstrapping=rbac-defaults and annotated for auto-update.
func ClusterRoles() []rbacv1.ClusterRole {
	monitoring := []string{"/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*"}
	roles := []rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			rule([]string{"*"}, g("*"), "*"),
			urlRule([]string{"*"}, "*")),
		clusterRole("system:discovery", nil, urlRule([]string{"get"},
			"/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")),
		clusterRole("system:monitoring", nil, urlRule([]string{"get"}, monitoring...),
			rule([]string{"get"}, g(""), "nodes/metrics")),
		clusterRole("system:basic-user", nil,
			rule([]string{"create"}, g("authorization.k8s.io"), "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			rule([]string{"create"}, g("authentication.k8s.io"), "selfsubjectreviews")),
		clusterRole("system:public-info-viewer", nil, urlRule([]string{"get"}, "/livez", "/readyz", "/healthz", "/version", "/version/")),
		{ObjectMeta: metav1.ObjectMeta{Name: "admin"}, AggregationRule: aggregation(AggregateToAdmin)},
		{ObjectMeta: metav1.ObjectMeta{Name: "edit", Labels: map[string]string{AggregateToAdmin: "true"}}, AggregationRule: aggregation(AggregateToEdit)},
		{ObjectMeta: metav1.ObjectMeta{Name: "view", Labels: map[string]string{AggregateToEdit: "true"}}, AggregationRule: aggregation(AggregateToView)},
		clusterRole("system:aggregate-to-admin", map[string]string{AggregateToAdmin: "true"},
			rule([]string{"create"}, g("authorization.k8s.io"), "localsubjectaccessreviews"),
			rule(verbsReadWrite, g(rbacv1.GroupName), "roles", "rolebindings")),
		clusterRole("system:aggregate-to-edit", map[string]string{AggregateToEdit: "true"}, editRules()...),
		clusterRole("system:aggregate-to-view", map[string]string{AggregateToView: "true"}, viewRules()...),
		// metrics.k8s.io is served by the API server itself: the role metrics-server's
		// manifest adds, so that view, edit and admin may run kubectl top.
		clusterRole("system:aggregated-metrics-reader", map[string]string{AggregateToView: "true", AggregateToEdit: "true", AggregateToAdmin: "true"},
			rule([]string{"get", "list", "watch"}, g("metrics.k8s.io"), "pods", "nodes")),
		clusterRole("system:node", nil, NodeRules()...),
		clusterRole("system:node-bootstrapper", nil,
			rule([]string{"create", "get", "list", "watch"}, g("certificates.k8s.io"), "certificatesigningrequests")),
		// The CSR approver asks (SubjectAccessReview) whether a requester may create these
		// subresources before it approves a kubelet client certificate, as Kubernetes'.
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			rule([]string{"create"}, g("certificates.k8s.io"), "certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			rule([]string{"create"}, g("certificates.k8s.io"), "certificatesigningrequests/selfnodeclient")),
		clusterRole("system:certificates.k8s.io:kube-apiserver-client-kubelet-approver", nil,
			rbacv1.PolicyRule{Verbs: []string{"approve"}, APIGroups: g("certificates.k8s.io"), Resources: []string{"signers"},
				ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet"}}),
		clusterRole("system:auth-delegator", nil,
			rule([]string{"create"}, g("authentication.k8s.io"), "tokenreviews"),
			rule([]string{"create"}, g("authorization.k8s.io"), "subjectaccessreviews")),
		clusterRole("system:kube-controller-manager", nil,
			eventsRule(),
			rule([]string{"create"}, g("coordination.k8s.io"), "leases"),
			rbacv1.PolicyRule{Verbs: []string{"get", "update"}, APIGroups: g("coordination.k8s.io"), Resources: []string{"leases"},
				ResourceNames: []string{"kube-controller-manager", "wasmplane-controller-manager"}},
			rule([]string{"create"}, g(""), "secrets", "serviceaccounts"),
			rule([]string{"delete"}, g(""), "secrets"),
			rule([]string{"get"}, g(""), "namespaces", "secrets", "serviceaccounts", "configmaps"),
			rule([]string{"update"}, g(""), "secrets", "serviceaccounts"),
			rule([]string{"create"}, g("authentication.k8s.io"), "tokenreviews"),
			rule([]string{"create"}, g("authorization.k8s.io"), "subjectaccessreviews"),
			rule([]string{"list", "watch"}, g("*"), "*"),
			rule([]string{"create"}, g(""), "serviceaccounts/token"),
			// csrapproving and csrsigning.
			rule([]string{"get"}, g("certificates.k8s.io"), "certificatesigningrequests"),
			rule([]string{"update"}, g("certificates.k8s.io"), "certificatesigningrequests/approval", "certificatesigningrequests/status"),
			rbacv1.PolicyRule{Verbs: []string{"approve", "sign"}, APIGroups: g("certificates.k8s.io"), Resources: []string{"signers"},
				ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet"}}),
		clusterRole("system:kube-scheduler", nil,
			eventsRule(),
			rule([]string{"create"}, g("coordination.k8s.io"), "leases"),
			rbacv1.PolicyRule{Verbs: []string{"get", "update", "list", "watch"}, APIGroups: g("coordination.k8s.io"), Resources: []string{"leases"},
				ResourceNames: []string{"kube-scheduler", "wasmplane-scheduler"}},
			rule(verbsReadWrite, g("coordination.k8s.io"), "leasecandidates"),
			rule(verbsRead, g(""), "nodes"),
			rule([]string{"get", "list", "watch", "delete"}, g(""), "pods"),
			rule([]string{"create"}, g(""), "pods/binding", "bindings"),
			// wasmplane's own: a failed scheduling attempt goes to the pod's trace (pods/trace).
			rule([]string{"create"}, g(""), "pods/trace"),
			rule([]string{"patch", "update"}, g(""), "pods/status"),
			rule(verbsRead, g(""), "services", "replicationcontrollers"),
			rule(verbsRead, g("apps", "extensions"), "replicasets"),
			rule(verbsRead, g("apps"), "statefulsets"),
			rule(verbsRead, g("policy"), "poddisruptionbudgets"),
			rule(verbsRead, g(""), "persistentvolumeclaims", "persistentvolumes"),
			rule([]string{"create"}, g("authentication.k8s.io"), "tokenreviews"),
			rule([]string{"create"}, g("authorization.k8s.io"), "subjectaccessreviews"),
			rule(verbsRead, g("storage.k8s.io"), "csinodes", "csidrivers", "csistoragecapacities"),
			rule([]string{"get", "list", "watch"}, g("storage.k8s.io"), "volumeattachments"),
			rule(verbsRead, g(""), "namespaces"),
			// DynamicResourceAllocation (GA, on by default) and its device taints, as Kubernetes.
			rule(verbsRead, g("resource.k8s.io"), "resourceclaims", "deviceclasses"),
			rule(verbsReadUpdt, g("resource.k8s.io"), "resourceclaims/status"),
			rule(verbsRead, g("resource.k8s.io"), "resourceslices"),
			rule(verbsRead, g("resource.k8s.io"), "devicetaintrules"),
			// wasmplane's scheduler runs the Filter/Score plugins objects name.
			rule(verbsRead, g(WasmplaneGroup), "wasmplugins", "clusterwasmplugins", "wasmmodules")),
		clusterRole("system:volume-scheduler", nil,
			rule(verbsReadUpdt, g(""), "persistentvolumes"),
			rule(verbsRead, g("storage.k8s.io"), "storageclasses"),
			rule(verbsReadUpdt, g(""), "persistentvolumeclaims")),
		clusterRole("system:node-proxier", nil,
			rule([]string{"list", "watch"}, g(""), "services", "endpoints"),
			rule(verbsRead, g(""), "nodes"),
			eventsRule(),
			rule([]string{"list", "watch"}, g("discovery.k8s.io"), "endpointslices")),
		clusterRole("system:kubelet-api-admin", nil,
			rule(verbsRead, g(""), "nodes"),
			rule([]string{"proxy"}, g(""), "nodes"),
			rule([]string{"*"}, g(""), "nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log")),
		// Uploading a module is how a tenant ships its own plugin: modules are immutable and
		// content-addressed, so uploading affects nobody else; deleting them (cluster-admin
		// only) could. Uploaders see every module's object (digest, size, the namespaces it
		// is shared with) but not its bytes (wasmmodules/blob), which would let one tenant
		// re-upload, and so run, another's module. Bind it with a ClusterRoleBinding per tenant.
		clusterRole("wasmplane:module-uploader", nil,
			rule([]string{"create", "get", "list", "watch"}, g(WasmplaneGroup), "wasmmodules")),
		clusterRole("system:service-account-issuer-discovery", nil, urlRule([]string{"get"},
			"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
	}
	for i := range roles {
		addDefaults(&roles[i].ObjectMeta)
	}
	return roles
}

func clusterBinding(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return clusterBindingNamed(role, role, subjects...)
}

func clusterBindingNamed(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func groupSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// ClusterRoleBindings returns the default ClusterRoleBindings (a fresh copy on every call).
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bindings := []rbacv1.ClusterRoleBinding{
		clusterBinding("cluster-admin", groupSubject(authn.GroupMasters)),
		clusterBinding("system:monitoring", groupSubject("system:monitoring")),
		clusterBinding("system:discovery", groupSubject(authn.GroupAuthenticated)),
		clusterBinding("system:basic-user", groupSubject(authn.GroupAuthenticated)),
		clusterBinding("system:public-info-viewer", groupSubject(authn.GroupAuthenticated), groupSubject(authn.GroupUnauthenticated)),
		clusterBinding("system:node-proxier", userSubject("system:kube-proxy")),
		clusterBinding("system:kube-controller-manager", userSubject("system:kube-controller-manager")),
		clusterBinding("system:kube-scheduler", userSubject("system:kube-scheduler")),
		clusterBinding("system:volume-scheduler", userSubject("system:kube-scheduler")),
		// Kubernetes creates system:node without subjects: the node authorizer serves kubelets.
		clusterBinding("system:node"),
		clusterBinding("system:service-account-issuer-discovery", groupSubject(authn.GroupServiceAccounts)),
		// As kubeadm does: bootstrap-token users (wasmplane agent joining) may ask for a
		// kubelet client certificate.
		clusterBindingNamed("wasmplane:kubelet-bootstrap", "system:node-bootstrapper", groupSubject(authn.GroupBootstrappers)),
		// As kubeadm's node-autoapprove-bootstrap and node-autoapprove-certificate-rotation:
		// the CSR approver approves a bootstrap token's kubelet client certificate request,
		// and a node's request to renew its own.
		clusterBindingNamed("wasmplane:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", groupSubject(authn.GroupBootstrappers)),
		clusterBindingNamed("wasmplane:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", groupSubject(authn.GroupNodes)),
	}
	for i := range bindings {
		addDefaults(&bindings[i].ObjectMeta)
	}
	return bindings
}

func addDefaults(m *metav1.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[BootstrappingLabel] = BootstrappingValue
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[rbacv1.AutoUpdateAnnotationKey] = "true"
}

func autoUpdate(m *metav1.ObjectMeta) bool {
	return m.Annotations[rbacv1.AutoUpdateAnnotationKey] == "true"
}

// Roles returns the default Roles of kube-system (a fresh copy on every call), as
// Kubernetes bootstraps them: extension-apiserver-authentication-reader lets aggregated
// API servers read the ConfigMap that says which client certificates to trust.
func Roles() []rbacv1.Role {
	reader := rule([]string{"get", "list", "watch"}, g(""), "configmaps")
	reader.ResourceNames = []string{"extension-apiserver-authentication"}
	r := rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication-reader", Namespace: metav1.NamespaceSystem},
		Rules: []rbacv1.PolicyRule{reader}}
	addDefaults(&r.ObjectMeta)
	return []rbacv1.Role{r}
}

// EnsureBootstrapPolicy creates the default ClusterRoles and ClusterRoleBindings that are
// missing, and reconciles those annotated rbac.authorization.kubernetes.io/autoupdate=true:
// missing rules, aggregation selectors, labels, annotations and subjects are added
// (nothing a cluster admin added is removed); a binding whose roleRef differs is
// recreated, since roleRef is immutable. Call it on every start.
func EnsureBootstrapPolicy(ctx context.Context, c kubernetes.Interface) error {
	roles := c.RbacV1().ClusterRoles()
	for _, want := range ClusterRoles() {
		have, err := roles.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := roles.Create(ctx, &want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating clusterrole %s: %w", want.Name, err)
			}
			slog.Debug("created bootstrap clusterrole", "name", want.Name)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading clusterrole %s: %w", want.Name, err)
		}
		if !autoUpdate(&have.ObjectMeta) {
			continue
		}
		if updated, changed := reconcileRole(have, &want); changed {
			if _, err := roles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("reconciling clusterrole %s: %w", want.Name, err)
			}
			slog.Debug("reconciled bootstrap clusterrole", "name", want.Name)
		}
	}
	for _, want := range Roles() {
		nsRoles := c.RbacV1().Roles(want.Namespace)
		have, err := nsRoles.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := nsRoles.Create(ctx, &want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating role %s/%s: %w", want.Namespace, want.Name, err)
			}
		case err != nil:
			return fmt.Errorf("reading role %s/%s: %w", want.Namespace, want.Name, err)
		case autoUpdate(&have.ObjectMeta):
			if covered, missing := validation.Covers(have.Rules, want.Rules); !covered {
				have = have.DeepCopy()
				have.Rules = append(have.Rules, missing...)
				if _, err := nsRoles.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("reconciling role %s/%s: %w", want.Namespace, want.Name, err)
				}
			}
		}
	}
	bindings := c.RbacV1().ClusterRoleBindings()
	for _, want := range ClusterRoleBindings() {
		have, err := bindings.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := bindings.Create(ctx, &want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating clusterrolebinding %s: %w", want.Name, err)
			}
			slog.Debug("created bootstrap clusterrolebinding", "name", want.Name)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading clusterrolebinding %s: %w", want.Name, err)
		}
		if !autoUpdate(&have.ObjectMeta) {
			continue
		}
		updated, changed := reconcileBinding(have, &want)
		if !changed {
			continue
		}
		if have.RoleRef != want.RoleRef {
			if err := bindings.Delete(ctx, have.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("replacing clusterrolebinding %s: %w", want.Name, err)
			}
			updated.ResourceVersion, updated.UID = "", ""
			if _, err := bindings.Create(ctx, updated, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("recreating clusterrolebinding %s: %w", want.Name, err)
			}
		} else if _, err := bindings.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("reconciling clusterrolebinding %s: %w", want.Name, err)
		}
		slog.Debug("reconciled bootstrap clusterrolebinding", "name", want.Name)
	}
	return nil
}

func mergeMeta(have *metav1.ObjectMeta, want *metav1.ObjectMeta) {
	if have.Labels == nil && len(want.Labels) > 0 {
		have.Labels = map[string]string{}
	}
	maps.Copy(have.Labels, want.Labels)
	if have.Annotations == nil && len(want.Annotations) > 0 {
		have.Annotations = map[string]string{}
	}
	maps.Copy(have.Annotations, want.Annotations)
}

// reconcileRole returns have with want's missing rules, selectors and metadata added.
// An aggregated role's rules belong to the aggregation controller and are left alone.
func reconcileRole(have, want *rbacv1.ClusterRole) (*rbacv1.ClusterRole, bool) {
	out := have.DeepCopy()
	mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	if want.AggregationRule != nil {
		if out.AggregationRule == nil {
			out.AggregationRule = &rbacv1.AggregationRule{}
		}
		for _, sel := range want.AggregationRule.ClusterRoleSelectors {
			if !slices.ContainsFunc(out.AggregationRule.ClusterRoleSelectors, func(s metav1.LabelSelector) bool {
				return apiequality.Semantic.DeepEqual(s, sel)
			}) {
				out.AggregationRule.ClusterRoleSelectors = append(out.AggregationRule.ClusterRoleSelectors, sel)
			}
		}
	} else if covered, missing := validation.Covers(out.Rules, want.Rules); !covered {
		out.Rules = append(out.Rules, missing...)
	}
	return out, !apiequality.Semantic.DeepEqual(out, have)
}

// reconcileBinding returns have with want's missing subjects, roleRef and metadata.
func reconcileBinding(have, want *rbacv1.ClusterRoleBinding) (*rbacv1.ClusterRoleBinding, bool) {
	out := have.DeepCopy()
	mergeMeta(&out.ObjectMeta, &want.ObjectMeta)
	out.RoleRef = want.RoleRef
	for _, s := range want.Subjects {
		if !slices.Contains(out.Subjects, s) {
			out.Subjects = append(out.Subjects, s)
		}
	}
	return out, !apiequality.Semantic.DeepEqual(out, have)
}
