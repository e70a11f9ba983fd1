package imagelocality

import (
	"context"
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
	v1 "k8s.io/api/core/v1"
)

type handle struct {
	framework.Handle
	snap *framework.Snapshot
}

func (h handle) SnapshotSharedLister() framework.NodeInfoLister { return h.snap }

func TestScore(t *testing.T) {
	const mb = 1024 * 1024
	withImage := st.Node("with", st.Res("cpu", "1"))
	withImage.Status.Images = []v1.ContainerImage{{Names: []string{"example.com/app:1"}, SizeBytes: 500 * mb}}
	nis := []*framework.NodeInfo{st.NodeInfo(withImage), st.NodeInfo(st.Node("without", st.Res("cpu", "1")))}
	pl := &ImageLocality{h: handle{snap: framework.NewSnapshot(nis...)}}
	pod := st.Pod("p")
	pod.Spec.Containers[0].Image = "example.com/app:1"
	state := framework.NewCycleState()
	if s := pl.PreScore(context.Background(), state, pod, nis); !s.IsSuccess() {
		t.Fatal(s.Err())
	}
	// 500 MB × spread 1/2 = 250 MB; (250 − 23) × 100 / (1000 − 23) = 23.
	for i, want := range []int64{23, 0} {
		got, s := pl.Score(context.Background(), state, pod, nis[i])
		if !s.IsSuccess() || got != want {
			t.Errorf("node %d: got %d, want %d", i, got, want)
		}
	}
	if normalizedImageName("nginx") != "nginx:latest" || normalizedImageName("host:5000/nginx") != "host:5000/nginx:latest" || normalizedImageName("nginx:1.2") != "nginx:1.2" {
		t.Error("image name normalization")
	}
}
