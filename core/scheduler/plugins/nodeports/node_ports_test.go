package nodeports

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

func portPod(name string, ports ...v1.ContainerPort) *v1.Pod {
	p := st.Pod(name)
	p.Spec.Containers[0].Ports = ports
	return p
}

func TestFilter(t *testing.T) {
	tcp := func(ip string, port int32) v1.ContainerPort {
		return v1.ContainerPort{HostIP: ip, HostPort: port, ContainerPort: port, Protocol: v1.ProtocolTCP}
	}
	udp := func(ip string, port int32) v1.ContainerPort {
		return v1.ContainerPort{HostIP: ip, HostPort: port, ContainerPort: port, Protocol: v1.ProtocolUDP}
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		existing *v1.Pod
		fits     bool
	}{
		{"no ports", portPod("p"), portPod("e", tcp("", 80)), true},
		{"other port", portPod("p", tcp("", 8080)), portPod("e", tcp("", 80)), true},
		{"same port", portPod("p", tcp("", 80)), portPod("e", tcp("", 80)), false},
		{"same port other protocol", portPod("p", udp("", 80)), portPod("e", tcp("", 80)), true},
		{"different IPs", portPod("p", tcp("127.0.0.1", 80)), portPod("e", tcp("127.0.0.2", 80)), true},
		{"0.0.0.0 vs specific IP", portPod("p", tcp("0.0.0.0", 80)), portPod("e", tcp("127.0.0.1", 80)), false},
		{"specific IP vs 0.0.0.0", portPod("p", tcp("127.0.0.1", 80)), portPod("e", tcp("", 80)), false},
		{"container port without host port", portPod("p", v1.ContainerPort{ContainerPort: 80}), portPod("e", tcp("", 80)), true},
	}
	pl := &NodePorts{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ni := st.NodeInfo(st.Node("n", st.Res("cpu", "1")), tc.existing)
			state := framework.NewCycleState()
			_, s := pl.PreFilter(context.Background(), state, tc.pod, nil)
			if s.IsSkip() {
				if !tc.fits {
					t.Fatal("skipped a pod with host ports")
				}
				return
			}
			s = pl.Filter(context.Background(), state, tc.pod, ni)
			if s.IsSuccess() != tc.fits {
				t.Fatalf("fits=%v want %v", s.IsSuccess(), tc.fits)
			}
			if !tc.fits && (s.Code() != framework.Unschedulable || s.Message() != ErrReason) {
				t.Fatalf("got %v %q", s.Code(), s.Message())
			}
		})
	}
}

func TestPortsReleasedOnRemove(t *testing.T) {
	e := portPod("e", v1.ContainerPort{HostPort: 80, ContainerPort: 80})
	ni := st.NodeInfo(st.Node("n", st.Res("cpu", "1")), e)
	if err := ni.RemovePod(e); err != nil {
		t.Fatal(err)
	}
	if s := (&NodePorts{}).Filter(context.Background(), framework.NewCycleState(), portPod("p", v1.ContainerPort{HostPort: 80}), ni); !s.IsSuccess() {
		t.Fatal("port not released")
	}
}
