package resources

import (
	"context"
	"slices"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCSRSubresourceStrategies checks what /approval and /status writes keep of a
// CertificateSigningRequest, as Kubernetes' strategies do.
func TestCSRSubresourceStrategies(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stored := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "example.com/signer", Usages: []certificatesv1.KeyUsage{"digital signature"}},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, LastTransitionTime: earlier, LastUpdateTime: earlier}}}}
	}
	types := func(c []certificatesv1.CertificateSigningRequestCondition) []string {
		var out []string
		for _, x := range c {
			out = append(out, string(x.Type))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		approval  bool
		conds     []certificatesv1.CertificateSigningRequestCondition
		wantTypes []string
	}{
		{name: "approval writes all its conditions", approval: true,
			conds:     []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}, {Type: "ApprovalPatch"}},
			wantTypes: []string{"Approved", "ApprovalPatch"}},
		{name: "status keeps the stored decisions", approval: false,
			conds:     []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue}},
			wantTypes: []string{"Approved", "Failed"}},
		{name: "status cannot add a decision", approval: false,
			conds:     []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}},
			wantTypes: []string{"Approved"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, obj := stored(), stored()
			obj.Annotations = map[string]string{"written": "true"}
			obj.Spec.SignerName = "example.com/other"
			obj.Status.Conditions = tc.conds
			if tc.approval {
				csrApprovalStrategy{}.PrepareForUpdate(context.Background(), obj, old)
			} else {
				csrStatusStrategy{}.PrepareForUpdate(context.Background(), obj, old)
			}
			if got := types(obj.Status.Conditions); !slices.Equal(got, tc.wantTypes) {
				t.Errorf("conditions %v, want %v", got, tc.wantTypes)
			}
			if obj.Annotations["written"] != "true" {
				t.Error("the write's metadata was dropped")
			}
			if obj.Spec.SignerName != "example.com/signer" {
				t.Errorf("the spec changed to %q", obj.Spec.SignerName)
			}
			for _, c := range obj.Status.Conditions {
				if c.Status == "" || c.LastUpdateTime.IsZero() || c.LastTransitionTime.IsZero() {
					t.Errorf("condition %s not defaulted: %+v", c.Type, c)
				}
				if c.Type == certificatesv1.CertificateApproved && !c.LastTransitionTime.Equal(&earlier) {
					t.Errorf("Approved lost its transition time: %v", c.LastTransitionTime)
				}
			}
		})
	}
}
