package crdnames

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(name, group, plural, kind string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Names: apiextensionsv1.CustomResourceDefinitionNames{
			Plural: plural, Singular: kind + "s", Kind: kind, ListKind: kind + "List", ShortNames: short}},
	}
}

// accepted is c with its requested names accepted.
func accepted(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c.Status.AcceptedNames = c.Spec.Names
	return c
}

func TestCalculate(t *testing.T) {
	cases := []struct {
		name        string
		crd         *apiextensionsv1.CustomResourceDefinition
		others      []*apiextensionsv1.CustomResourceDefinition
		reason      string
		established apiextensionsv1.ConditionStatus
		plural      string
	}{
		{"alone", crd("a.g", "g", "as", "A"), nil, "NoConflicts", apiextensionsv1.ConditionTrue, "as"},
		{"other group same names", crd("a.g", "g", "as", "A"), []*apiextensionsv1.CustomResourceDefinition{accepted(crd("a.h", "h", "as", "A"))}, "NoConflicts", apiextensionsv1.ConditionTrue, "as"},
		{"plural taken as a short name", crd("a.g", "g", "as", "A"), []*apiextensionsv1.CustomResourceDefinition{accepted(crd("b.g", "g", "bs", "B", "as"))}, "PluralConflict", apiextensionsv1.ConditionFalse, ""},
		{"short name taken", crd("a.g", "g", "as", "A", "x"), []*apiextensionsv1.CustomResourceDefinition{accepted(crd("b.g", "g", "bs", "B", "x"))}, "ShortNamesConflict", apiextensionsv1.ConditionFalse, "as"},
		{"kind taken", crd("a.g", "g", "as", "B"), []*apiextensionsv1.CustomResourceDefinition{accepted(crd("b.g", "g", "bs", "B"))}, "ListKindConflict", apiextensionsv1.ConditionFalse, "as"},
		{"requested but not accepted elsewhere", crd("a.g", "g", "as", "A"), []*apiextensionsv1.CustomResourceDefinition{crd("b.g", "g", "as", "A")}, "NoConflicts", apiextensionsv1.ConditionTrue, "as"},
		{"own accepted names", accepted(crd("a.g", "g", "as", "A", "x")), []*apiextensionsv1.CustomResourceDefinition{accepted(crd("a.g", "g", "as", "A", "x"))}, "NoConflicts", apiextensionsv1.ConditionTrue, "as"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Calculate(c.crd, append(c.others, c.crd))
			if r.NamesAccepted.Reason != c.reason {
				t.Errorf("NamesAccepted reason %q (%s), want %q", r.NamesAccepted.Reason, r.NamesAccepted.Message, c.reason)
			}
			if r.Established.Status != c.established {
				t.Errorf("Established %s, want %s", r.Established.Status, c.established)
			}
			if r.Names.Plural != c.plural {
				t.Errorf("accepted plural %q, want %q", r.Names.Plural, c.plural)
			}
		})
	}
}
