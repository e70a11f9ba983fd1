// Package crdnames decides which names a CustomResourceDefinition may serve under and its
// NamesAccepted and Established conditions, by the rules of Kubernetes' naming and
// establishing controllers: a name another CRD of the group has accepted is refused and
// reported, never served twice.
package crdnames

import (
	"fmt"
	"slices"
	"strings"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Result is the outcome for one CRD.
type Result struct {
	// Names are the accepted names.
	Names apiextensionsv1.CustomResourceDefinitionNames
	// NamesAccepted and Established are the conditions to report.
	NamesAccepted, Established apiextensionsv1.CustomResourceDefinitionCondition
}

// Calculate returns the accepted names and conditions of crd given every CRD of the
// cluster (crd included or not). A CRD whose names are all accepted is Established at
// once: the caller serves it before reporting the condition.
func Calculate(crd *apiextensionsv1.CustomResourceDefinition, all []*apiextensionsv1.CustomResourceDefinition) Result {
	resources, kinds := sets.New[string](), sets.New[string]()
	for _, c := range all {
		if c.Spec.Group != crd.Spec.Group || c.Name == crd.Name {
			continue
		}
		n := c.Status.AcceptedNames
		resources.Insert(n.Plural, n.Singular)
		resources.Insert(n.ShortNames...)
		kinds.Insert(n.Kind, n.ListKind)
	}
	resources.Delete("")
	kinds.Delete("")
	accepted := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	refuse := func(reason string, err error) {
		accepted.Status, accepted.Reason, accepted.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	want, have := crd.Spec.Names, crd.Status.AcceptedNames
	names := have
	if err := fresh(want.Plural, have.Plural, resources); err != nil {
		refuse("PluralConflict", err)
	} else {
		names.Plural = want.Plural
	}
	if err := fresh(want.Singular, have.Singular, resources); err != nil {
		refuse("SingularConflict", err)
	} else {
		names.Singular = want.Singular
	}
	if !slices.Equal(want.ShortNames, have.ShortNames) {
		var msgs []string
		for _, sn := range want.ShortNames {
			if slices.Contains(have.ShortNames, sn) {
				continue
			}
			if err := fresh(sn, "", resources); err != nil {
				msgs = append(msgs, err.Error())
			}
		}
		if len(msgs) > 0 {
			refuse("ShortNamesConflict", errorList(msgs))
		} else {
			names.ShortNames = want.ShortNames
		}
	}
	if err := fresh(want.Kind, have.Kind, kinds); err != nil {
		refuse("KindConflict", err)
	} else {
		names.Kind = want.Kind
	}
	if err := fresh(want.ListKind, have.ListKind, kinds); err != nil {
		refuse("ListKindConflict", err)
	} else {
		names.ListKind = want.ListKind
	}
	names.Categories = want.Categories
	if accepted.Status == apiextensionsv1.ConditionUnknown {
		accepted.Status, accepted.Reason, accepted.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}
	established := apiextensionsv1.CustomResourceDefinitionCondition{
		Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse, Reason: "NotAccepted", Message: "not all names are accepted",
	}
	if old := apiextensionshelpers.FindCRDCondition(crd, apiextensionsv1.Established); old != nil {
		established = *old
	}
	if established.Status != apiextensionsv1.ConditionTrue && accepted.Status == apiextensionsv1.ConditionTrue {
		established = apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted",
		}
	}
	return Result{Names: names, NamesAccepted: accepted, Established: established}
}

// fresh accepts a name equal to the one already accepted or used by nobody else.
func fresh(requested, accepted string, used sets.Set[string]) error {
	if requested == accepted || !used.Has(requested) {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// errorList joins messages as utilerrors.NewAggregate prints them.
func errorList(msgs []string) error {
	if len(msgs) == 1 {
		return fmt.Errorf("%s", msgs[0])
	}
	return fmt.Errorf("[%s]", strings.Join(msgs, ", "))
}
