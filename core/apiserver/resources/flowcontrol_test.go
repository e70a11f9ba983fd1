package resources

import (
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/utils/ptr"
)

// errorFields is "type field" of each error, for comparing with a table's want.
func errorFields(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = string(e.Type) + " " + e.Field
	}
	return out
}

func checkErrors(t *testing.T, got field.ErrorList, want []string) {
	t.Helper()
	g := errorFields(got)
	if len(g) != len(want) {
		t.Fatalf("errors %v, want %v", g, want)
	}
	for i := range g {
		if g[i] != want[i] {
			t.Fatalf("errors %v, want %v", g, want)
		}
	}
}

func flowSchema(name string, mutate func(*flowcontrolv1.FlowSchemaSpec)) *flowcontrolv1.FlowSchema {
	all := []string{"*"}
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects:      []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "list"}, APIGroups: all, Resources: all, Namespaces: []string{"team-a"}}},
		}},
	}}
	if mutate != nil {
		mutate(&fs.Spec)
	}
	DefaultFlowSchema(fs)
	return fs
}

func TestValidateFlowSchema(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fs     *flowcontrolv1.FlowSchema
		errors []string
	}{
		{name: "valid, precedence defaulted", fs: flowSchema("ok", nil)},
		{name: "precedence too high", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 10001 }),
			errors: []string{"FieldValueInvalid spec.matchingPrecedence"}},
		{name: "precedence 1 is exempt's", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = 1 }),
			errors: []string{"FieldValueInvalid spec.matchingPrecedence"}},
		{name: "negative precedence", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) { s.MatchingPrecedence = -3 }),
			errors: []string{"FieldValueInvalid spec.matchingPrecedence"}},
		{name: "unknown distinguisher", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: "ByColor"}
		}), errors: []string{"FieldValueNotSupported spec.distinguisherMethod.type"}},
		{name: "no priority level", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) { s.PriorityLevelConfiguration.Name = "" }),
			errors: []string{"FieldValueRequired spec.priorityLevelConfiguration.name"}},
		{name: "rule without subjects or rules", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules = []flowcontrolv1.PolicyRulesWithSubjects{{}}
		}), errors: []string{"FieldValueRequired spec.rules[0].subjects", "FieldValueRequired spec.rules[0]"}},
		{name: "subject with the wrong member", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, User: &flowcontrolv1.UserSubject{Name: "a"}}}
		}), errors: []string{"FieldValueRequired spec.rules[0].subjects[0].group", "FieldValueForbidden spec.rules[0].subjects[0].user"}},
		{name: "service account without namespace", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Name: "*"}}}
		}), errors: []string{"FieldValueRequired spec.rules[0].subjects[0].serviceAccount.namespace"}},
		{name: "unknown subject kind", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].Subjects = []flowcontrolv1.Subject{{Kind: "Robot"}}
		}), errors: []string{"FieldValueNotSupported spec.rules[0].subjects[0].kind"}},
		{name: "bad verbs, wildcard beside groups, no namespaces", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].ResourceRules = []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"get", "fly"}, APIGroups: []string{"*", "apps"}, Resources: []string{"pods"}}}
		}), errors: []string{"FieldValueNotSupported spec.rules[0].resourceRules[0].verbs", "FieldValueInvalid spec.rules[0].resourceRules[0].apiGroups",
			"FieldValueRequired spec.rules[0].resourceRules[0].namespaces"}},
		{name: "bad namespace name", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].ResourceRules[0].Namespaces = []string{"Team_A"}
		}), errors: []string{"FieldValueInvalid spec.rules[0].resourceRules[0].namespaces[0]"}},
		{name: "non-resource URLs", fs: flowSchema("x", func(s *flowcontrolv1.FlowSchemaSpec) {
			s.Rules[0].NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"/healthz", "metrics", "/a//b", "/x*", "/ok/*"}}}
		}), errors: []string{"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[1]",
			"FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[2]", "FieldValueInvalid spec.rules[0].nonResourceRules[0].nonResourceURLs[3]"}},
		{name: "mandatory catch-all as bootstrapped", fs: bootstrap.MandatoryFlowSchemaCatchAll.DeepCopy()},
		{name: "mandatory catch-all changed", fs: func() *flowcontrolv1.FlowSchema {
			fs := bootstrap.MandatoryFlowSchemaCatchAll.DeepCopy()
			fs.Spec.MatchingPrecedence = 9000
			return fs
		}(), errors: []string{"FieldValueInvalid spec"}},
		{name: "duplicate condition", fs: func() *flowcontrolv1.FlowSchema {
			fs := flowSchema("x", nil)
			fs.Status.Conditions = []flowcontrolv1.FlowSchemaCondition{{Type: "Dangling"}, {Type: "Dangling"}, {}}
			return fs
		}(), errors: []string{"FieldValueDuplicate status.conditions[1].type", "FieldValueRequired status.conditions[2].type"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkErrors(t, ValidateFlowSchema(tc.fs), tc.errors) })
	}
}

func limitedLevel(name string, mutate func(*flowcontrolv1.LimitedPriorityLevelConfiguration)) *flowcontrolv1.PriorityLevelConfiguration {
	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{}}}}}
	if mutate != nil {
		mutate(pl.Spec.Limited)
	}
	DefaultPriorityLevelConfiguration(pl)
	return pl
}

func TestDefaultPriorityLevelConfiguration(t *testing.T) {
	pl := limitedLevel("x", nil)
	l := pl.Spec.Limited
	if *l.NominalConcurrencyShares != 30 || *l.LendablePercent != 0 || l.BorrowingLimitPercent != nil {
		t.Errorf("limited defaults: %+v", l)
	}
	if q := l.LimitResponse.Queuing; q.Queues != 64 || q.HandSize != 8 || q.QueueLengthLimit != 50 {
		t.Errorf("queuing defaults: %+v", q)
	}
	zero := limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
		l.NominalConcurrencyShares = ptr.To[int32](0)
	})
	if *zero.Spec.Limited.NominalConcurrencyShares != 0 {
		t.Error("an explicit zero share was defaulted; v1 keeps it")
	}
	ex := &flowcontrolv1.PriorityLevelConfiguration{Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt,
		Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{}}}
	DefaultPriorityLevelConfiguration(ex)
	if *ex.Spec.Exempt.NominalConcurrencyShares != 0 || *ex.Spec.Exempt.LendablePercent != 0 {
		t.Errorf("exempt defaults: %+v", ex.Spec.Exempt)
	}
}

func TestValidatePriorityLevelConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pl     *flowcontrolv1.PriorityLevelConfiguration
		errors []string
	}{
		{name: "valid, defaulted", pl: limitedLevel("ok", nil)},
		{name: "reject without queuing", pl: limitedLevel("ok", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}
		})},
		{name: "reject with queuing", pl: limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.LimitResponse.Type = flowcontrolv1.LimitResponseTypeReject
		}), errors: []string{"FieldValueForbidden spec.limited.limitResponse.queuing"}},
		{name: "negative shares, percentages out of range", pl: limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.NominalConcurrencyShares, l.LendablePercent, l.BorrowingLimitPercent = ptr.To[int32](-1), ptr.To[int32](101), ptr.To[int32](-1)
		}), errors: []string{"FieldValueInvalid spec.limited.nominalConcurrencyShares", "FieldValueInvalid spec.limited.lendablePercent",
			"FieldValueInvalid spec.limited.borrowingLimitPercent"}},
		{name: "hand larger than the deck", pl: limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.LimitResponse.Queuing = &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 5, QueueLengthLimit: -1}
		}), errors: []string{"FieldValueInvalid spec.limited.limitResponse.queuing.queueLengthLimit", "FieldValueInvalid spec.limited.limitResponse.queuing.handSize"}},
		{name: "too much entropy", pl: limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.LimitResponse.Queuing = &flowcontrolv1.QueuingConfiguration{Queues: 10_000_000, HandSize: 40, QueueLengthLimit: 5}
		}), errors: []string{"FieldValueInvalid spec.limited.limitResponse.queuing.handSize"}},
		{name: "unknown response type", pl: limitedLevel("x", func(l *flowcontrolv1.LimitedPriorityLevelConfiguration) {
			l.LimitResponse = flowcontrolv1.LimitResponse{Type: "Drop"}
		}), errors: []string{"FieldValueNotSupported spec.limited.limitResponse.type"}},
		{name: "Exempt type needs the exempt name", pl: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt}},
			errors: []string{"FieldValueInvalid spec.type"}},
		{name: "Limited without limited, with exempt", pl: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited, Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{}}},
			errors: []string{"FieldValueForbidden spec.exempt", "FieldValueRequired spec.limited"}},
		{name: "unknown type", pl: &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: "Sometimes"}},
			errors: []string{"FieldValueNotSupported spec.type"}},
		{name: "mandatory exempt may tune spec.exempt", pl: func() *flowcontrolv1.PriorityLevelConfiguration {
			pl := bootstrap.MandatoryPriorityLevelConfigurationExempt.DeepCopy()
			pl.Spec.Exempt.NominalConcurrencyShares = ptr.To[int32](10)
			return pl
		}()},
		{name: "mandatory catch-all is fixed", pl: func() *flowcontrolv1.PriorityLevelConfiguration {
			pl := bootstrap.MandatoryPriorityLevelConfigurationCatchAll.DeepCopy()
			pl.Spec.Limited.NominalConcurrencyShares = ptr.To[int32](50)
			return pl
		}(), errors: []string{"FieldValueInvalid spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkErrors(t, ValidatePriorityLevelConfiguration(tc.pl), tc.errors) })
	}
}
