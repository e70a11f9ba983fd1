package nodename

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
)

func TestFilter(t *testing.T) {
	ni := st.NodeInfo(st.Node("n1", st.Res("cpu", "1")))
	for _, tc := range []struct {
		nodeName string
		fits     bool
	}{{"", true}, {"n1", true}, {"n2", false}} {
		p := st.Pod("p")
		p.Spec.NodeName = tc.nodeName
		s := (&NodeName{}).Filter(context.Background(), framework.NewCycleState(), p, ni)
		if s.IsSuccess() != tc.fits || (!tc.fits && (s.Code() != framework.UnschedulableAndUnresolvable || s.Message() != ErrReason)) {
			t.Errorf("nodeName %q: got %v %v", tc.nodeName, s.Code(), s.Reasons())
		}
	}
}
