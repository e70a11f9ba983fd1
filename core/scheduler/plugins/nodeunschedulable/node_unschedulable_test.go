package nodeunschedulable

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

func TestFilter(t *testing.T) {
	tol := []v1.Toleration{{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name          string
		unschedulable bool
		tolerations   []v1.Toleration
		fits          bool
	}{
		{"schedulable node", false, nil, true},
		{"cordoned node", true, nil, false},
		{"cordoned node, tolerated", true, tol, true},
	} {
		n := st.Node("n", st.Res("cpu", "1"))
		n.Spec.Unschedulable = tc.unschedulable
		p := st.Pod("p")
		p.Spec.Tolerations = tc.tolerations
		s := (&NodeUnschedulable{}).Filter(context.Background(), framework.NewCycleState(), p, st.NodeInfo(n))
		if s.IsSuccess() != tc.fits || (!tc.fits && s.Message() != ErrReasonUnschedulable) {
			t.Errorf("%s: got %v %v", tc.name, s.Code(), s.Reasons())
		}
	}
}
