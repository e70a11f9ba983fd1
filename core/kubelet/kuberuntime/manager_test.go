package kuberuntime

import (
	"context"
	"io"
	"k8s.io/client-go/tools/record"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A host-network pod's sandbox asks for the node's network namespace and sets no
// hostname: it shares the node's UTS namespace, and runc refuses a hostname there.
func TestSandboxConfigHostNetwork(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{Hostname: "web-0", Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	f := newFixture(t, pod)
	cfg := f.m.sandboxConfig(pod, 0)
	if cfg.Hostname != "web-0" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_POD {
		t.Fatalf("pod network: hostname %q, network %v; want web-0, POD", cfg.Hostname, cfg.Linux.SecurityContext.NamespaceOptions.Network)
	}
	pod.Spec.HostNetwork = true
	cfg = f.m.sandboxConfig(pod, 0)
	if cfg.Hostname != "" || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Fatalf("host network: hostname %q, network %v; want none, NODE", cfg.Hostname, cfg.Linux.SecurityContext.NamespaceOptions.Network)
	}
}

// Namespaces follow the pod spec as the kubelet's do; in particular each container gets
// its own PID namespace unless the pod shares one (CRI's zero value would share it).
func TestNamespaceOptions(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name          string
		spec          corev1.PodSpec
		net, pid, ipc runtimeapi.NamespaceMode
	}{
		{"default", corev1.PodSpec{}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD},
		{"host network", corev1.PodSpec{HostNetwork: true}, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD},
		{"shared PID", corev1.PodSpec{ShareProcessNamespace: &yes}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD},
		{"host PID and IPC", corev1.PodSpec{HostPID: true, HostIPC: true}, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_NODE},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}, Spec: tc.spec}
		pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "img"}}
		m := NewManager(Config{Runtime: critest.NewFakeRuntimeService(), LogRoot: t.TempDir()})
		sb := m.sandboxConfig(pod, 0).GetLinux().GetSecurityContext().GetNamespaceOptions()
		ct := m.containerConfig(pod, &pod.Spec.Containers[0], ContainerTypeRegular, 0, "img", "").GetLinux().GetSecurityContext().GetNamespaceOptions()
		for what, ns := range map[string]*runtimeapi.NamespaceOption{"sandbox": sb, "container": ct} {
			if ns.GetNetwork() != tc.net || ns.GetPid() != tc.pid || ns.GetIpc() != tc.ipc {
				t.Errorf("%s: %s namespaces %v; want network %v, pid %v, ipc %v", tc.name, what, ns, tc.net, tc.pid, tc.ipc)
			}
		}
	}
}

// The pod log directory handed to the runtime is absolute even when the root is given
// relative (`wasmplane up --data-dir .wasmplane`): containerd resolves it in its own
// working directory.
func TestLogRootIsAbsolute(t *testing.T) {
	m := NewManager(Config{Runtime: critest.NewFakeRuntimeService(), LogRoot: filepath.Join("node", "pods")})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	if d := m.sandboxConfig(pod, 0).LogDirectory; !filepath.IsAbs(d) {
		t.Fatalf("log directory %q is not absolute", d)
	}
}

func TestSubscriptedField(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
		Labels:      map[string]string{"app": "pi"},
	}}
	for path, want := range map[string]string{
		"metadata.annotations['batch.kubernetes.io/job-completion-index']": "3",
		"metadata.labels['app']":     "pi",
		"metadata.labels['missing']": "",
		"metadata.labels[app]":       "",
		"spec.unknown":               "",
	} {
		if got := subscriptedField(pod, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
}

// TestEvents: the events a pod's life records, with Kubernetes' reasons and the
// container's field path.
func TestEvents(t *testing.T) {
	f := newFixture(t, testPod(corev1.RestartPolicyAlways, nil, "a"))
	rec := record.NewFakeRecorder(100)
	f.m.SetRecorder(rec)
	drain := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				out = append(out, e)
			default:
				return out
			}
		}
	}
	f.sync()
	got := drain()
	want := []string{`Normal Pulling Pulling image "a"`, `Normal Pulled Successfully pulled image "a" in 0s`, "Normal Created Created container: a", "Normal Started Started container a"}
	if !slices.Equal(got, want) {
		t.Errorf("first start: %q, want %q", got, want)
	}
	f.exit("a", 1)
	f.sync() // restarts at once
	drain()
	f.exit("a", 1)
	f.sync()
	if got := drain(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning BackOff Back-off restarting failed container a in pod") {
		t.Errorf("crash loop: %q", got)
	}
	if ref := ContainerRef(f.pod, "a", ContainerTypeRegular); ref.FieldPath != "spec.containers{a}" || ref.Kind != "Pod" || ref.UID != f.pod.UID {
		t.Errorf("reference %+v", ref)
	}
	if ref := ContainerRef(f.pod, "i", ContainerTypeInit); ref.FieldPath != "spec.initContainers{i}" {
		t.Errorf("init reference %+v", ref)
	}
}

// An ephemeral container starts once in the running pod's sandbox, in its target's
// process namespace, and is never restarted.
func TestEphemeralContainer(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, nil, "a")
	f := newFixture(t, pod)
	f.sync()
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{TargetContainerName: "a", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: "debug", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}, Stdin: true, TTY: true}}}
	if res := f.sync(); len(res.Started) != 1 || res.Started[0] != "debugger" {
		t.Fatalf("started %v, want [debugger]", res.Started)
	}
	st := f.status()
	d, a := st.Latest("debugger"), st.Latest("a")
	if d == nil || d.Type != ContainerTypeEphemeral || len(f.rt.Sandboxes) != 1 {
		t.Fatalf("debugger %+v, %d sandboxes", d, len(f.rt.Sandboxes))
	}
	c := corev1.Container(pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	cfg := f.m.containerConfig(pod, &c, ContainerTypeEphemeral, 0, "debug", "")
	if err := targetNamespace(cfg, pod, st, "debugger"); err != nil {
		t.Fatal(err)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != a.ID || !cfg.Stdin || !cfg.Tty || string(cfg.Envs[0].Value) != "y" {
		t.Errorf("config: namespaces %v (target %s), stdin %v, tty %v, envs %v", ns, a.ID, cfg.Stdin, cfg.Tty, cfg.Envs)
	}
	f.exit("debugger", 1)
	if res := f.sync(); len(res.Started) != 0 {
		t.Fatalf("an exited ephemeral container was restarted: %v", res.Started)
	}
	// A target that has no container yet is an error the next sync retries.
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{TargetContainerName: "gone",
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "second", Image: "debug"}})
	if res := f.sync(); res.Errors["second"].Reason != ReasonCreateContainer {
		t.Fatalf("second: %+v", res)
	}
}
