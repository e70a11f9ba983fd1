package admissionregistration

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func config(sideEffects admissionregistrationv1.SideEffectClass, expr string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	u := "https://hooks.example.com/v"
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &u},
			SideEffects: ptr.To(sideEffects), AdmissionReviewVersions: []string{"v1"}}}}
	if expr != "" {
		c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "m", Expression: expr}}
	}
	return c
}

// Creates are strict; an update may keep what the stored object already had (side
// effects Some, stored through an older version), as Kubernetes' update validation does.
func TestUpdateKeepsWhatTheStoredObjectHad(t *testing.T) {
	res := Definitions()[0].Resource
	s := res.Strategy
	ctx := context.Background()
	some := config(admissionregistrationv1.SideEffectClassSome, "")
	s.Default(some)
	if errs := s.Validate(ctx, some); len(errs) != 1 || errs[0].Field != "webhooks[0].sideEffects" {
		t.Fatalf("create with sideEffects Some: %v", errs)
	}
	updated := some.DeepCopy()
	updated.Webhooks[0].TimeoutSeconds = ptr.To[int32](5)
	if errs := s.ValidateUpdate(ctx, updated, some); len(errs) != 0 {
		t.Fatalf("update keeping sideEffects Some: %v", errs)
	}
	none := config(admissionregistrationv1.SideEffectClassNone, "")
	s.Default(none)
	back := none.DeepCopy()
	back.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassSome)
	if errs := s.ValidateUpdate(ctx, back, none); len(errs) != 1 {
		t.Fatalf("update to sideEffects Some: %v", errs)
	}
}

func TestMatchConditionCompileErrors(t *testing.T) {
	s := Definitions()[0].Resource.Strategy
	ctx := context.Background()
	for expr, ok := range map[string]bool{
		`object.metadata.name.startsWith("a")`: true,
		`request.userInfo.username == "x"`:     true,
		`object.metadata.name ===`:             false,
		`params.x == 1`:                        false, // no params for webhooks
		`"a"`:                                  false, // not a bool
	} {
		c := config(admissionregistrationv1.SideEffectClassNone, expr)
		s.Default(c)
		errs := s.Validate(ctx, c)
		if ok != (len(errs) == 0) {
			t.Errorf("%s: %v", expr, errs)
		}
		if !ok && (len(errs) != 1 || errs[0].Field != "webhooks[0].matchConditions[0].expression") {
			t.Errorf("%s: want one error on the expression, got %v", expr, errs)
		}
	}
}
