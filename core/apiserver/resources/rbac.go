package resources

import (
	"context"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/authz"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateRBACName is Kubernetes' rule for RBAC object names: any path segment, so that
// "system:node" is a valid name.
func validateRBACName(name string, _ bool) []string { return path.IsValidPathSegmentName(name) }

// RBAC returns the rbac.authorization.k8s.io/v1 resources. Writes of roles and bindings
// are checked against escalation with a (for the escalate and bind verbs) and r (for the
// rules the writer holds); the writer is the request's user (authn.UserFrom).
func RBAC(a authz.Authorizer, r authz.RuleResolver) []Definition {
	gv := rbacv1.SchemeGroupVersion
	rolePrinter := &registry.Printer{
		Columns: []registry.TableColumn{endpoints.NameColumn,
			{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}},
		Row: func(obj runtime.Object) []any {
			m := metaOf(obj)
			return []any{m.Name, m.CreationTimestamp.UTC().Format(time.RFC3339)}
		},
	}
	bindingPrinter := func(kind string) *registry.Printer {
		return &registry.Printer{
			Columns: []registry.TableColumn{endpoints.NameColumn,
				{Name: "Role", Type: "string", Description: rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"]},
				endpoints.AgeColumn,
				{Name: "Users", Type: "string", Priority: 1, Description: "Users in the " + kind},
				{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in the " + kind},
				{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in the " + kind}},
			Row: func(obj runtime.Object) []any {
				var ref rbacv1.RoleRef
				var subjects []rbacv1.Subject
				m := metaOf(obj)
				switch b := obj.(type) {
				case *rbacv1.RoleBinding:
					ref, subjects = b.RoleRef, b.Subjects
				case *rbacv1.ClusterRoleBinding:
					ref, subjects = b.RoleRef, b.Subjects
				}
				users, groups, sas := subjectStrings(subjects)
				return []any{m.Name, ref.Kind + "/" + ref.Name, endpoints.Age(m.CreationTimestamp, time.Now()),
					strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
			},
		}
	}
	roleCheck := func(gr string) func(ctx context.Context, obj, old runtime.Object) error {
		return func(ctx context.Context, obj, old runtime.Object) error {
			m := metaOf(obj)
			var rules, oldRules []rbacv1.PolicyRule
			switch o := obj.(type) {
			case *rbacv1.Role:
				rules = o.Rules
			case *rbacv1.ClusterRole:
				// An aggregated role's rules are written by the aggregation controller, which
				// therefore needs escalate on clusterroles (or system:masters).
				rules = o.Rules
			}
			switch o := old.(type) {
			case *rbacv1.Role:
				oldRules = o.Rules
			case *rbacv1.ClusterRole:
				oldRules = o.Rules
			}
			if old != nil && equalRules(rules, oldRules) {
				// Metadata-only updates (labels, finalizers) grant nothing new.
				return nil
			}
			u, _ := authn.UserFrom(ctx)
			if err := authz.CheckRoleWrite(ctx, a, r, u, m.Namespace, m.Name, rules); err != nil {
				return apierrors.NewForbidden(rbacv1.Resource(gr), m.Name, err)
			}
			return nil
		}
	}
	bindingCheck := func(gr string) func(ctx context.Context, obj, old runtime.Object) error {
		return func(ctx context.Context, obj, old runtime.Object) error {
			m := metaOf(obj)
			var ref rbacv1.RoleRef
			switch b := obj.(type) {
			case *rbacv1.RoleBinding:
				ref = b.RoleRef
			case *rbacv1.ClusterRoleBinding:
				ref = b.RoleRef
			}
			// Updates are checked too (they may add subjects), as in Kubernetes.
			u, _ := authn.UserFrom(ctx)
			if err := authz.CheckBindingWrite(ctx, a, r, u, m.Namespace, ref); err != nil {
				return apierrors.NewForbidden(rbacv1.Resource(gr), m.Name, err)
			}
			return nil
		}
	}
	return []Definition{
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, AllowCreateOnUpdate: true, GroupVersion: gv, Name: "roles", SingularName: "role", Kind: "Role", ListKind: "RoleList", Namespaced: true,
			NewFunc: func() runtime.Object { return &rbacv1.Role{} }, NewListFunc: func() runtime.Object { return &rbacv1.RoleList{} },
			Strategy: &strategy{validate: func(obj runtime.Object) field.ErrorList {
				return validateRules(obj.(*rbacv1.Role).Rules, true, field.NewPath("rules"))
			}, validateOnUpdate: true},
			ValidateName: validateRBACName, CheckWrite: roleCheck("roles"), Printer: rolePrinter,
		}},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, AllowCreateOnUpdate: true, GroupVersion: gv, Name: "rolebindings", SingularName: "rolebinding", Kind: "RoleBinding", ListKind: "RoleBindingList", Namespaced: true,
			NewFunc: func() runtime.Object { return &rbacv1.RoleBinding{} }, NewListFunc: func() runtime.Object { return &rbacv1.RoleBindingList{} },
			Strategy: &strategy{
				defaults: func(obj runtime.Object) {
					b := obj.(*rbacv1.RoleBinding)
					defaultBinding(&b.RoleRef, b.Subjects)
				},
				validate: func(obj runtime.Object) field.ErrorList {
					b := obj.(*rbacv1.RoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, true)
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(obj.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef)
				},
			},
			ValidateName: validateRBACName, CheckWrite: bindingCheck("rolebindings"), Printer: bindingPrinter("roleBinding"),
		}},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, AllowCreateOnUpdate: true, GroupVersion: gv, Name: "clusterroles", SingularName: "clusterrole", Kind: "ClusterRole", ListKind: "ClusterRoleList",
			NewFunc: func() runtime.Object { return &rbacv1.ClusterRole{} }, NewListFunc: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			Strategy: &strategy{validate: func(obj runtime.Object) field.ErrorList {
				cr := obj.(*rbacv1.ClusterRole)
				errs := validateRules(cr.Rules, false, field.NewPath("rules"))
				if ar := cr.AggregationRule; ar != nil {
					p := field.NewPath("aggregationRule", "clusterRoleSelectors")
					if len(ar.ClusterRoleSelectors) == 0 {
						errs = append(errs, field.Required(field.NewPath("aggregationRule"), "at least one clusterRoleSelector required if aggregationRule is non-nil"))
					}
					for i := range ar.ClusterRoleSelectors {
						errs = append(errs, metav1validation.ValidateLabelSelector(&ar.ClusterRoleSelectors[i],
							metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
					}
				}
				return errs
			}, validateOnUpdate: true},
			ValidateName: validateRBACName, CheckWrite: roleCheck("clusterroles"), Printer: rolePrinter,
		}},
		{Resource: &registry.Resource{
			AllowUnconditionalUpdate: true, AllowCreateOnUpdate: true, GroupVersion: gv, Name: "clusterrolebindings", SingularName: "clusterrolebinding", Kind: "ClusterRoleBinding", ListKind: "ClusterRoleBindingList",
			NewFunc: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, NewListFunc: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			Strategy: &strategy{
				defaults: func(obj runtime.Object) {
					b := obj.(*rbacv1.ClusterRoleBinding)
					defaultBinding(&b.RoleRef, b.Subjects)
				},
				validate: func(obj runtime.Object) field.ErrorList {
					b := obj.(*rbacv1.ClusterRoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, false)
				},
				validateOnUpdate: true,
				validateUpdate: func(obj, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(obj.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)
				},
			},
			ValidateName: validateRBACName, CheckWrite: bindingCheck("clusterrolebindings"), Printer: bindingPrinter("clusterRoleBinding"),
		}},
	}
}

func metaOf(obj runtime.Object) metav1.ObjectMeta {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return o.ObjectMeta
	case *rbacv1.ClusterRole:
		return o.ObjectMeta
	case *rbacv1.RoleBinding:
		return o.ObjectMeta
	case *rbacv1.ClusterRoleBinding:
		return o.ObjectMeta
	}
	return metav1.ObjectMeta{}
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if CompactRule(a[i]) != CompactRule(b[i]) {
			return false
		}
	}
	return true
}

// CompactRule renders a rule for comparison and messages.
func CompactRule(r rbacv1.PolicyRule) string { return authz.CompactString(r) }

func subjectStrings(subjects []rbacv1.Subject) (users, groups, sas []string) {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		}
	}
	return users, groups, sas
}

// defaultBinding applies rbac/v1's defaults: the roleRef's and User/Group subjects'
// apiGroup is rbac.authorization.k8s.io.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		if subjects[i].APIGroup == "" && (subjects[i].Kind == rbacv1.UserKind || subjects[i].Kind == rbacv1.GroupKind) {
			subjects[i].APIGroup = rbacv1.GroupName
		}
	}
}

// validateRules is Kubernetes' ValidatePolicyRule for each rule.
func validateRules(rules []rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := p.Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

// validateBinding is Kubernetes' ValidateRoleBinding / ValidateClusterRoleBinding for the
// roleRef and subjects.
func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if ref.Kind != "ClusterRole" && !(namespaced && ref.Kind == "Role") {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range validateRBACName(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		sp := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(s.Name, false) {
					errs = append(errs, field.Invalid(sp.Child("name"), s.Name, msg))
				}
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(sp.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(sp.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}
