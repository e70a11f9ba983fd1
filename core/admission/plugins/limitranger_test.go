package plugins

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func limitRange(items ...corev1.LimitRangeItem) corev1.LimitRange {
	return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr", Namespace: "ns"}, Spec: corev1.LimitRangeSpec{Limits: items}}
}

func TestLimitRanger(t *testing.T) {
	defaults := limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Default: rl("cpu", "500m", "memory", "256Mi"), DefaultRequest: rl("cpu", "100m", "memory", "128Mi")})
	bounds := limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
		Min: rl("cpu", "100m"), Max: rl("cpu", "1"), MaxLimitRequestRatio: rl("cpu", "4")})
	podMax := limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("memory", "1Gi")})
	withRes := func(req, lim corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Image: "i", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	tests := []struct {
		name       string
		ranges     []corev1.LimitRange
		containers []corev1.Container
		wantReq    corev1.ResourceList
		wantLim    corev1.ResourceList
		wantAnn    string
		wantErr    string
	}{
		{name: "defaults applied", ranges: []corev1.LimitRange{defaults},
			wantReq: rl("cpu", "100m", "memory", "128Mi"), wantLim: rl("cpu", "500m", "memory", "256Mi"),
			wantAnn: "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"},
		{name: "own values kept", ranges: []corev1.LimitRange{defaults}, containers: []corev1.Container{withRes(rl("cpu", "200m"), rl("cpu", "300m"))},
			wantReq: rl("cpu", "200m", "memory", "128Mi"), wantLim: rl("cpu", "300m", "memory", "256Mi"),
			wantAnn: "LimitRanger plugin set: memory request for container c; memory limit for container c"},
		{name: "within bounds", ranges: []corev1.LimitRange{bounds}, containers: []corev1.Container{withRes(rl("cpu", "250m"), rl("cpu", "1"))},
			wantReq: rl("cpu", "250m"), wantLim: rl("cpu", "1")},
		{name: "below min", ranges: []corev1.LimitRange{bounds}, containers: []corev1.Container{withRes(rl("cpu", "50m"), rl("cpu", "100m"))},
			wantErr: `pods "p" is forbidden: minimum cpu usage per Container is 100m, but request is 50m`},
		{name: "above max", ranges: []corev1.LimitRange{bounds}, containers: []corev1.Container{withRes(rl("cpu", "500m"), rl("cpu", "2"))},
			wantErr: `pods "p" is forbidden: maximum cpu usage per Container is 1, but limit is 2`},
		{name: "no limit under a max", ranges: []corev1.LimitRange{bounds}, containers: []corev1.Container{withRes(rl("cpu", "500m"), nil)},
			wantErr: `pods "p" is forbidden: [maximum cpu usage per Container is 1.  No limit is specified, cpu max limit to request ratio per Container is 4, but no limit is specified or limit is 0]`},
		{name: "ratio exceeded", ranges: []corev1.LimitRange{bounds}, containers: []corev1.Container{withRes(rl("cpu", "200m"), rl("cpu", "1"))},
			wantErr: `pods "p" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 5.000000`},
		{name: "pod max across containers", ranges: []corev1.LimitRange{podMax},
			containers: []corev1.Container{withRes(nil, rl("memory", "600Mi")), {Name: "d", Image: "i", Resources: corev1.ResourceRequirements{Limits: rl("memory", "600Mi")}}},
			wantErr:    `pods "p" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 1200Mi`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pod(tt.containers...)
			lr := &LimitRanger{Ranges: &fakeReader{ranges: tt.ranges}}
			a := attrs(admission.Create, "pods", p)
			err := lr.Admit(context.Background(), a)
			if err == nil {
				err = lr.Validate(context.Background(), a)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := p.Spec.Containers[0]
			for n, q := range tt.wantReq {
				if got := c.Resources.Requests[n]; got.Cmp(q) != 0 {
					t.Errorf("request %s = %s, want %s", n, got.String(), q.String())
				}
			}
			for n, q := range tt.wantLim {
				if got := c.Resources.Limits[n]; got.Cmp(q) != 0 {
					t.Errorf("limit %s = %s, want %s", n, got.String(), q.String())
				}
			}
			if got := p.Annotations[LimitRangerAnnotation]; got != tt.wantAnn {
				t.Errorf("annotation = %q, want %q", got, tt.wantAnn)
			}
		})
	}
}

func TestLimitRangerSkipsUpdates(t *testing.T) {
	lr := &LimitRanger{Ranges: &fakeReader{ranges: []corev1.LimitRange{limitRange(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "1")})}}}
	if err := lr.Validate(context.Background(), attrs(admission.Update, "pods", pod())); err != nil {
		t.Fatalf("update checked: %v", err)
	}
}
