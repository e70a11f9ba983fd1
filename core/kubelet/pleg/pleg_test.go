package pleg

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestRelistReportsChangedPods(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	var changed []types.UID
	p := New(rt, 0, func(uid types.UID) { changed = append(changed, uid) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	sb := func(uid string) *runtimeapi.PodSandboxConfig {
		return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Uid: uid, Namespace: "ns"}, Labels: map[string]string{LabelPodUID: uid}}
	}
	idA, _ := rt.RunPodSandbox(ctx, sb("a"), "")
	if _, err := rt.RunPodSandbox(ctx, sb("b"), ""); err != nil {
		t.Fatal(err)
	}
	relist := func() []types.UID {
		changed = nil
		if err := p.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		slices.Sort(changed)
		return changed
	}
	if got := relist(); !slices.Equal(got, []types.UID{"a", "b"}) {
		t.Fatalf("first relist: %v", got)
	}
	if got := relist(); len(got) != 0 {
		t.Fatalf("nothing changed, got %v", got)
	}
	cid, err := rt.CreateContainer(ctx, idA, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image: &runtimeapi.ImageSpec{Image: "i"}, Labels: map[string]string{LabelPodUID: "a"}}, sb("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("container created: %v", got)
	}
	_ = rt.StartContainer(ctx, cid)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("container started: %v", got)
	}
	_ = rt.StopContainer(ctx, cid, 0)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("container stopped: %v", got)
	}
	_ = rt.RemoveContainer(ctx, cid)
	_ = rt.RemovePodSandbox(ctx, idA)
	if got := relist(); !slices.Equal(got, []types.UID{"a"}) {
		t.Fatalf("pod removed: %v", got)
	}
}
