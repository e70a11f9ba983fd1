package kuberuntime

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"
)

type fixture struct {
	t     *testing.T
	rt    *critest.FakeRuntimeService
	m     *Manager
	clock *testingclock.FakeClock
	pod   *corev1.Pod
}

func newFixture(t *testing.T, pod *corev1.Pod) *fixture {
	clock := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	rt := critest.NewFakeRuntimeService()
	m := NewManager(Config{Runtime: rt, Images: critest.NewFakeImageService(), LogRoot: t.TempDir(), NodeIP: "10.0.0.1",
		BackOff: flowcontrol.NewFakeBackOff(10*time.Second, 5*time.Minute, clock), Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &fixture{t: t, rt: rt, m: m, clock: clock, pod: pod}
}

func (f *fixture) status() *PodStatus {
	f.t.Helper()
	st, err := f.m.GetPodStatus(context.Background(), f.pod.UID, f.pod.Name, f.pod.Namespace)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

func (f *fixture) sync() SyncResult {
	f.t.Helper()
	res := f.m.SyncPod(context.Background(), f.pod, f.status(), nil)
	if res.Err != nil {
		f.t.Fatalf("SyncPod: %v", res.Err)
	}
	return res
}

// exit marks the newest instance of a container as exited with code at the fake now.
func (f *fixture) exit(name string, code int32) {
	f.t.Helper()
	c := f.status().Latest(name)
	if c == nil {
		f.t.Fatalf("no container %s", name)
	}
	f.rt.Lock()
	fc := f.rt.Containers[c.ID]
	fc.State, fc.ExitCode, fc.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, f.clock.Now().UnixNano()
	f.rt.Unlock()
}

func TestSyncPodRunsInitThenContainers(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, []string{"init"}, "a", "b")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "WHO", Value: "me"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	pod.Spec.Containers[0].Args = []string{"hello $(WHO) in $(POD)"}
	f := newFixture(t, pod)
	res := f.sync()
	if len(res.Started) != 1 || res.Started[0] != "init" {
		t.Fatalf("first sync started %v, want [init]", res.Started)
	}
	if len(f.rt.Sandboxes) != 1 {
		t.Fatalf("sandboxes = %d", len(f.rt.Sandboxes))
	}
	for _, sb := range f.rt.Sandboxes {
		if want := filepath.Join(f.m.LogDir(), "ns_p_uid-1"); sb.Labels[LabelPodUID] != "uid-1" || sb.Metadata.Name != "p" {
			t.Errorf("sandbox = %+v (log dir %s)", sb, want)
		}
	}
	// While init runs, nothing else starts.
	if res := f.sync(); len(res.Started) != 0 {
		t.Fatalf("started %v while init runs", res.Started)
	}
	f.exit("init", 0)
	res = f.sync()
	if len(res.Started) != 2 {
		t.Fatalf("after init: started %v", res.Started)
	}
	st := f.status()
	a := st.Latest("a")
	f.rt.Lock()
	fa := f.rt.Containers[a.ID]
	mem := fa.LinuxResources.GetMemoryLimitInBytes()
	f.rt.Unlock()
	if mem != 64<<20 {
		t.Errorf("memory limit = %d", mem)
	}
	if a.Hash != HashContainer(&pod.Spec.Containers[0]) || a.RestartCount != 0 || a.Type != ContainerTypeRegular {
		t.Errorf("container a = %+v", a)
	}
	cfg := f.m.containerConfig(pod, &pod.Spec.Containers[0], ContainerTypeRegular, 0, "img", "10.0.0.1")
	if cfg.LogPath != "a/0.log" || cfg.Args[0] != "hello me in p" {
		t.Errorf("container config log path %q args %q", cfg.LogPath, cfg.Args)
	}
	if res := f.sync(); len(res.Started) != 0 || len(res.Errors) != 0 {
		t.Fatalf("steady state sync: %+v", res)
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	f := newFixture(t, testPod(corev1.RestartPolicyAlways, nil, "a"))
	f.sync()
	// The first crash restarts at once; the next ones wait 10 s, then 20 s.
	f.exit("a", 1)
	if res := f.sync(); len(res.Started) != 1 {
		t.Fatalf("first restart: %+v", res)
	}
	for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		f.exit("a", 1)
		res := f.sync()
		e, ok := res.Errors["a"]
		if !ok || e.Reason != ReasonCrashLoopBackOff || res.RequeueAfter != wait {
			t.Fatalf("crash %d: %+v, want back-off %s", i+2, res, wait)
		}
		f.clock.Step(wait - time.Second)
		if res := f.sync(); len(res.Started) != 0 {
			t.Fatalf("restarted before the back-off ended")
		}
		f.clock.Step(time.Second)
		if res := f.sync(); len(res.Started) != 1 {
			t.Fatalf("not restarted after the back-off: %+v", res)
		}
	}
	st := f.status()
	if st.Latest("a").RestartCount != 4 {
		t.Errorf("restart count = %d", st.Latest("a").RestartCount)
	}
	// Only the newest instance and one previous are kept.
	if n := len(st.Containers); n != 2 {
		t.Errorf("kept %d instances, want 2", n)
	}
	// Ten minutes of running fine resets the back-off.
	f.clock.Step(11 * time.Minute)
	f.exit("a", 1)
	if res := f.sync(); len(res.Started) != 1 {
		t.Fatalf("back-off not reset after running fine: %+v", res)
	}
}

func TestKillAndRemovePod(t *testing.T) {
	f := newFixture(t, testPod(corev1.RestartPolicyAlways, nil, "a", "b"))
	f.sync()
	st := f.status()
	if err := f.m.KillPod(context.Background(), f.pod, st, nil); err != nil {
		t.Fatal(err)
	}
	st = f.status()
	if st.Running() || st.Sandboxes[0].Ready {
		t.Fatalf("after KillPod: %+v", st)
	}
	if err := f.m.RemovePod(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if st := f.status(); len(st.Containers) != 0 || len(st.Sandboxes) != 0 {
		t.Fatalf("after RemovePod: %+v", st)
	}
}
