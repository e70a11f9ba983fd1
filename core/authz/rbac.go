package authz

import (
	"context"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/core/authn"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/informers"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// RBAC is Kubernetes' RBAC authorizer over client-go listers of Roles, RoleBindings,
// ClusterRoles and ClusterRoleBindings. It allows or has no opinion; it never denies.
type RBAC struct {
	roles               rbaclisters.RoleLister
	roleBindings        rbaclisters.RoleBindingLister
	clusterRoles        rbaclisters.ClusterRoleLister
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister
}

// NewRBAC returns an RBAC authorizer reading the four listers.
func NewRBAC(roles rbaclisters.RoleLister, roleBindings rbaclisters.RoleBindingLister,
	clusterRoles rbaclisters.ClusterRoleLister, clusterRoleBindings rbaclisters.ClusterRoleBindingLister) *RBAC {
	return &RBAC{roles: roles, roleBindings: roleBindings, clusterRoles: clusterRoles, clusterRoleBindings: clusterRoleBindings}
}

// NewRBACFromInformers registers the four rbac/v1 informers with f and returns an RBAC
// authorizer over their listers; start f (and wait for sync) before serving.
func NewRBACFromInformers(f informers.SharedInformerFactory) *RBAC {
	r := f.Rbac().V1()
	return NewRBAC(r.Roles().Lister(), r.RoleBindings().Lister(), r.ClusterRoles().Lister(), r.ClusterRoleBindings().Lister())
}

// Authorize implements Authorizer: Allow when a rule bound to the user matches, with
// Kubernetes' reason; otherwise NoOpinion, with the lookup errors met on the way.
func (r *RBAC) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var errs []error
	allowedBy := ""
	r.visitRules(ctx, a.User, a.Namespace, func(source func() string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if RuleAllows(a, rule) {
			allowedBy = source()
			return false
		}
		return true
	})
	if allowedBy != "" {
		return DecisionAllow, "RBAC: allowed by " + allowedBy, nil
	}
	reason := ""
	if len(errs) > 0 {
		reason = fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return DecisionNoOpinion, reason, nil
}

// RulesFor implements RuleResolver: every rule bound to u in namespace (cluster-wide
// bindings included). Rules found are returned with an error if some could not be read
// (a binding to a missing role), which makes a rules review "incomplete".
func (r *RBAC) RulesFor(ctx context.Context, u *authn.User, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	r.visitRules(ctx, u, namespace, func(_ func() string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			rules = append(rules, *rule)
		}
		return true
	})
	return rules, utilerrors.NewAggregate(errs)
}

// RulesForRoleRef implements RoleRefResolver: the rules of the Role (in namespace) or
// ClusterRole ref names.
func (r *RBAC) RulesForRoleRef(_ context.Context, namespace string, ref rbacv1.RoleRef) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		role, err := r.roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	case "ClusterRole":
		role, err := r.clusterRoles.Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return role.Rules, nil
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// visitRules calls visit with each rule bound to u in namespace, ClusterRoleBindings
// first, until visit returns false. source describes where a rule came from, worded as
// Kubernetes words an allow reason; it is a function so that the (rarely needed) text is
// only built for the rule that decides.
func (r *RBAC) visitRules(ctx context.Context, u *authn.User, namespace string, visit func(source func() string, rule *rbacv1.PolicyRule, err error) bool) {
	if u == nil {
		return
	}
	crbs, err := r.clusterRoleBindings.List(labels.Everything())
	if err != nil {
		if !visit(nil, nil, err) {
			return
		}
	}
	for _, b := range crbs {
		subject, ok := appliesTo(u, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := r.RulesForRoleRef(ctx, "", b.RoleRef)
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := func() string {
			return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subject, ""))
		}
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	rbs, err := r.roleBindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil {
		if !visit(nil, nil, err) {
			return
		}
	}
	for _, b := range rbs {
		subject, ok := appliesTo(u, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := r.RulesForRoleRef(ctx, namespace, b.RoleRef)
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := func() string {
			return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(subject, namespace))
		}
		for i := range rules {
			if !visit(source, &rules[i], nil) {
				return
			}
		}
	}
}

func describeSubject(s *rbacv1.Subject, bindingNamespace string) string {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return fmt.Sprintf("%s %q", s.Kind, ns+"/"+s.Name)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// appliesTo returns the first subject naming u. A ServiceAccount subject without a
// namespace means one in the binding's namespace.
func appliesTo(u *authn.User, subjects []rbacv1.Subject, bindingNamespace string) (*rbacv1.Subject, bool) {
	for i := range subjects {
		if subjectMatches(u, &subjects[i], bindingNamespace) {
			return &subjects[i], true
		}
	}
	return nil, false
}

func subjectMatches(u *authn.User, s *rbacv1.Subject, bindingNamespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.Name == s.Name
	case rbacv1.GroupKind:
		return u.InGroup(s.Name)
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return false
		}
		return u.Name == ServiceAccountUsername(ns, s.Name)
	}
	return false
}

// ServiceAccountUsername is the user name of a ServiceAccount
// (system:serviceaccount:NAMESPACE:NAME).
func ServiceAccountUsername(namespace, name string) string {
	return authn.ServiceAccountUserPrefix + namespace + ":" + name
}

// RuleAllows reports whether rule grants the request a, with Kubernetes' matching: "*"
// matches every verb, group, resource or URL; "*/sub" matches subresource sub of any
// resource; resourceNames, when set, restrict to those names; a non-resource URL ending in
// "*" matches by prefix.
func RuleAllows(a Attributes, rule *rbacv1.PolicyRule) bool {
	if !has(rule.Verbs, rbacv1.VerbAll) && !has(rule.Verbs, a.Verb) {
		return false
	}
	if !a.ResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == a.Path || (strings.HasSuffix(u, "*") && strings.HasPrefix(a.Path, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !has(rule.APIGroups, rbacv1.APIGroupAll) && !has(rule.APIGroups, a.APIGroup) {
		return false
	}
	if len(rule.ResourceNames) > 0 && !has(rule.ResourceNames, a.Name) {
		return false
	}
	combined := a.Resource
	if a.Subresource != "" {
		combined += "/" + a.Subresource
	}
	for _, res := range rule.Resources {
		if res == rbacv1.ResourceAll || res == combined {
			return true
		}
		// "*/status" grants the status subresource of every resource; Kubernetes has no
		// "pods/*" wildcard, so neither do we.
		if a.Subresource != "" && res == "*/"+a.Subresource {
			return true
		}
	}
	return false
}

// RulesAllow reports whether any of rules grants a.
func RulesAllow(a Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

func has(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}
