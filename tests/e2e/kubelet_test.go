// The kubelet tests run the kubelet end to end: an in-process API server, the built-in
// WASI runtime on a temporary socket and a kubelet, driven through client-go.

package e2e

import (
	"bytes"
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/nodelifecycle"
	"github.com/wasmplane/wasmplane/core/kubelet"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const nodeName = "node-1"

// env is one API server, one runtime and one kubelet.
type kubeletEnv struct {
	t        *testing.T
	s        *testserver.Server
	cs       kubernetes.Interface
	rt       *wasi.Server
	rootDir  string
	stopNode func()
}

func tune(c *kubelet.Config) {
	c.BackOffBase, c.BackOffMax = time.Second, 4*time.Second
	c.ResyncPeriod = 2 * time.Second
	c.RenewInterval, c.StatusUpdateFrequency = time.Second, time.Second
}

func kubeletSetup(t *testing.T) *kubeletEnv {
	t.Helper()
	s := testserver.StartAPI(t)
	e := &kubeletEnv{t: t, s: s, cs: s.Clientset(t, false), rootDir: t.TempDir()}
	// A short socket path: unix sockets are limited to ~108 bytes.
	sockDir, err := os.MkdirTemp("", "wp-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	rt, err := wasi.Serve(context.Background(), wasi.Config{Socket: filepath.Join(sockDir, "cri.sock"), RootDir: filepath.Join(e.rootDir, "runtime"), Logger: testserver.Logger()})
	if err != nil {
		t.Fatalf("starting the WASI runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	e.rt = rt
	for name, path := range modules {
		if _, err := rt.Images().ImportFile(context.Background(), path, name+":latest"); err != nil {
			t.Fatalf("importing %s: %v", name, err)
		}
	}
	e.startKubelet()
	t.Cleanup(func() { e.stopKubelet() })
	e.waitNodeReady()
	return e
}

func (e *kubeletEnv) startKubelet() {
	e.t.Helper()
	stop, err := server.StartNode(context.Background(), server.NodeConfig{RESTConfig: e.s.Config(false), NodeName: nodeName,
		RootDir: filepath.Join(e.rootDir, "node"), RuntimeEndpoint: e.rt.Endpoint(), Port: -1, Logger: testserver.Logger(), Tune: tune})
	if err != nil {
		e.t.Fatalf("starting the kubelet: %v", err)
	}
	e.stopNode = stop
}

func (e *kubeletEnv) stopKubelet() {
	if e.stopNode != nil {
		e.stopNode()
		e.stopNode = nil
	}
}

func (e *kubeletEnv) waitNodeReady() *corev1.Node {
	e.t.Helper()
	var node *corev1.Node
	e.poll(30*time.Second, "node Ready", func(ctx context.Context) (bool, error) {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 {
				return true, nil
			}
		}
		return false, nil
	})
	return node
}

func (e *kubeletEnv) poll(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	waitfor.Condition(e.t, timeout, what, cond)
}

func (e *kubeletEnv) create(pod *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	pod.Spec.NodeName = nodeName
	out, err := e.cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return out
}

func (e *kubeletEnv) waitPod(name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	e.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		e.t.Fatalf("waiting for pod %s to be %s: %v; last status: %+v", name, what, err, last.Status)
	}
	return last
}

// logs reads pods/log the way kubectl does (Stream decodes Status errors).
// waitEvents waits until the kubelet has recorded events with each of reasons about the
// pod, and that they name it and the node as Kubernetes' kubelet does.
func (e *kubeletEnv) waitEvents(pod string, reasons ...string) {
	e.t.Helper()
	e.poll(60*time.Second, "events "+strings.Join(reasons, ", ")+" about "+pod, func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, ev := range l.Items {
			if ev.Source.Component == "kubelet" && ev.Source.Host != "" && strings.HasPrefix(ev.InvolvedObject.FieldPath, "spec.containers{") {
				seen[ev.Reason] = true
			}
		}
		for _, r := range reasons {
			if !seen[r] {
				return false, nil
			}
		}
		return true, nil
	})
}

func (e *kubeletEnv) logs(name string, opts *corev1.PodLogOptions) (string, error) {
	rc, err := e.cs.CoreV1().Pods("default").GetLogs(name, opts).Stream(context.Background())
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func container(name, image string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: image + ":latest", Args: args, ImagePullPolicy: corev1.PullIfNotPresent}
}

func grace(s int64) *int64 { return &s }

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && ready(p) }

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestNodeRegistrationAndLease(t *testing.T) {
	e := kubeletSetup(t)
	n := e.waitNodeReady()
	if n.Labels[corev1.LabelHostname] != nodeName || n.Labels[corev1.LabelOSStable] == "" || n.Labels[corev1.LabelArchStable] == "" {
		t.Errorf("labels = %v", n.Labels)
	}
	if got := n.Status.Capacity.Pods().Value(); got != 110 {
		t.Errorf("pods capacity = %d, want 110", got)
	}
	if n.Status.Capacity.Memory().IsZero() || n.Status.Capacity.Cpu().IsZero() {
		t.Errorf("capacity = %v", n.Status.Capacity)
	}
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; got != "wasmplane-wasi://0.1.0" {
		t.Errorf("containerRuntimeVersion = %q", got)
	}
	var ip string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if ip != "127.0.0.1" {
		t.Errorf("addresses = %v", n.Status.Addresses)
	}
	types := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range n.Status.Conditions {
		types[c.Type] = c.Status
	}
	want := map[corev1.NodeConditionType]corev1.ConditionStatus{corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse}
	for k, v := range want {
		if types[k] != v {
			t.Errorf("condition %s = %s, want %s", k, types[k], v)
		}
	}
	var first time.Time
	e.poll(10*time.Second, "node lease", func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || *l.Spec.HolderIdentity != nodeName {
			t.Errorf("lease = %+v", l)
		}
		first = l.Spec.RenewTime.Time
		return true, nil
	})
	e.poll(10*time.Second, "lease renewal", func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first), nil
	})
}

func TestInitContainerTwoContainersAndLogs(t *testing.T) {
	e := kubeletSetup(t)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{container("setup", "init-setup")},
		Containers:     []corev1.Container{container("counter", "counter", "50ms"), container("hello", "toolbox", "echo", "hi there")},
		RestartPolicy:  corev1.RestartPolicyOnFailure,
	}})
	p := e.waitPod("web", "Running", 180*time.Second, func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodRunning || len(p.Status.InitContainerStatuses) != 1 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "counter" && cs.State.Running != nil {
				return true
			}
		}
		return false
	})
	ic := p.Status.InitContainerStatuses[0]
	if ic.State.Terminated == nil || ic.State.Terminated.Reason != "Completed" || ic.State.Terminated.ExitCode != 0 {
		t.Errorf("init container status = %+v", ic.State)
	}
	if !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "wasi://") || p.Status.PodIP != "127.0.0.1" || p.Status.HostIP != "127.0.0.1" || p.Status.StartTime == nil {
		t.Errorf("status = %+v", p.Status)
	}
	// Without a container name a two-container pod gets Kubernetes' 400.
	if _, err := e.logs("web", &corev1.PodLogOptions{}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "a container name must be specified for pod web, choose one of: [counter hello]") {
		t.Errorf("logs without container: %v", err)
	}
	out, err := e.logs("web", &corev1.PodLogOptions{Container: "setup"})
	if err != nil || !strings.Contains(out, "init-setup: done") {
		t.Errorf("init logs = %q, %v", out, err)
	}
	e.poll(20*time.Second, "hello's output", func(context.Context) (bool, error) {
		out, err := e.logs("web", &corev1.PodLogOptions{Container: "hello"})
		return err == nil && out == "hi there\n", nil
	})
	e.poll(20*time.Second, "counter output", func(context.Context) (bool, error) {
		out, err := e.logs("web", &corev1.PodLogOptions{Container: "counter"})
		return err == nil && strings.Contains(out, "count 5\n"), nil
	})
	tail := int64(2)
	out, err = e.logs("web", &corev1.PodLogOptions{Container: "counter", TailLines: &tail, Timestamps: true})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("tail 2 = %q, %v", out, err)
	}
	for _, l := range lines {
		ts, rest, _ := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasPrefix(rest, "count ") {
			t.Errorf("timestamped line %q", l)
		}
	}
	limit := int64(8)
	if out, err := e.logs("web", &corev1.PodLogOptions{Container: "counter", LimitBytes: &limit}); err != nil || out != "count 0\n" {
		t.Errorf("limitBytes 8 = %q, %v", out, err)
	}
	if _, err := e.logs("web", &corev1.PodLogOptions{Container: "counter", Previous: true}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "previous terminated container") {
		t.Errorf("previous without restart: %v", err)
	}
	// follow streams new lines as they are written.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	zero := int64(0)
	stream, err := e.cs.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Container: "counter", Follow: true, TailLines: &zero}).Stream(ctx)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer stream.Close()
	var got bytes.Buffer
	buf := make([]byte, 1024)
	for strings.Count(got.String(), "\n") < 3 {
		n, err := stream.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("follow read after %q: %v", got.String(), err)
		}
	}
	if !strings.HasPrefix(got.String(), "count ") {
		t.Errorf("followed %q", got.String())
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	e := kubeletSetup(t)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crasher"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("crash", "crash")}}})
	sawBackOff := false
	p := e.waitPod("crasher", "crash-looping", 180*time.Second, func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		return sawBackOff && cs.RestartCount >= 3
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 || cs.LastTerminationState.Terminated.Reason != "Error" {
		t.Errorf("last state = %+v", cs.LastTerminationState)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running (restartPolicy Always)", p.Status.Phase)
	}
	out, err := e.logs("crasher", &corev1.PodLogOptions{Previous: true})
	if err != nil || !strings.Contains(out, "crash: something went wrong") {
		t.Errorf("previous logs = %q, %v", out, err)
	}
	e.waitEvents("crasher", "Pulled", "Created", "Started", "BackOff")
}

func TestRestartPolicyNever(t *testing.T) {
	e := kubeletSetup(t)
	never := func(name string, c corev1.Container) {
		e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{c}, RestartPolicy: corev1.RestartPolicyNever}})
	}
	never("ok", container("main", "hello"))
	never("bad", container("main", "toolbox", "exit", "3"))
	for _, tc := range []struct {
		name   string
		phase  corev1.PodPhase
		code   int32
		reason string
	}{{"ok", corev1.PodSucceeded, 0, "Completed"}, {"bad", corev1.PodFailed, 3, "Error"}} {
		p := e.waitPod(tc.name, string(tc.phase), 180*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == tc.phase })
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != tc.code || term.Reason != tc.reason || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s: container state = %+v", tc.name, p.Status.ContainerStatuses[0])
		}
	}
	out, err := e.logs("ok", &corev1.PodLogOptions{})
	if err != nil || !strings.Contains(out, "hello from wasmplane") || !strings.Contains(out, "hello on stderr") {
		t.Errorf("logs of a completed pod = %q, %v", out, err)
	}
}

func (e *kubeletEnv) runtimeContainers(uid string, state runtimeapi.ContainerState) int {
	e.t.Helper()
	rt, _, err := kubelet.Connect(context.Background(), e.rt.Endpoint())
	if err != nil {
		e.t.Fatal(err)
	}
	defer rt.Close(context.Background())
	cts, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": uid}, State: &runtimeapi.ContainerStateValue{State: state}})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(cts)
}

func TestDeletePodStopsContainersWithinGrace(t *testing.T) {
	e := kubeletSetup(t)
	pod := e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("c", "counter")}, TerminationGracePeriodSeconds: grace(5)}})
	e.waitPod("doomed", "Running", 180*time.Second, running)
	if err := e.cs.CoreV1().Pods("default").Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Gone within the 5 s grace period, with 3 s for the status round trips.
	e.poll(5*time.Second+3*time.Second, "pod object gone within its grace period", func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods("default").Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if n := e.runtimeContainers(string(pod.UID), runtimeapi.ContainerState_CONTAINER_RUNNING); n != 0 {
		t.Errorf("%d containers still running after deletion", n)
	}
}

func TestLivenessProbeRestartsContainer(t *testing.T) {
	e := kubeletSetup(t)
	c := container("main", "toolbox", "sleep", "1h")
	c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"toolbox", "exit", "1"}}},
		PeriodSeconds: 1, FailureThreshold: 2, TimeoutSeconds: 5}
	r := container("ready", "toolbox", "sleep", "1h")
	r.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"toolbox", "exit", "0"}}},
		PeriodSeconds: 1, TimeoutSeconds: 5}
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unhealthy"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c, r}, TerminationGracePeriodSeconds: grace(1)}})
	sawReady := false
	e.waitPod("unhealthy", "restarted by liveness", 180*time.Second, func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "ready" && cs.Ready {
				sawReady = true
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "main" && cs.RestartCount >= 1 {
				return sawReady
			}
		}
		return false
	})
	e.waitEvents("unhealthy", "Unhealthy", "Killing", "Started")
}

func TestKubeletRestartKeepsHealthyContainers(t *testing.T) {
	e := kubeletSetup(t)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "steady"}, Spec: corev1.PodSpec{Containers: []corev1.Container{container("c", "counter", "1s")}}})
	before := e.waitPod("steady", "Running", 180*time.Second, running)
	id := before.Status.ContainerStatuses[0].ContainerID
	e.stopKubelet()
	e.startKubelet()
	// A new pod running proves the new kubelet synced; then the old one must be untouched.
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Spec: corev1.PodSpec{Containers: []corev1.Container{container("c", "counter", "1s")}}})
	e.waitPod("after", "Running", 180*time.Second, running)
	after, err := e.cs.CoreV1().Pods("default").Get(context.Background(), "steady", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := after.Status.ContainerStatuses[0]
	if cs.ContainerID != id || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("after a kubelet restart: %+v (container was %s)", cs, id)
	}
}

func TestStoppedKubeletMakesNodeNotReadyAndEvicts(t *testing.T) {
	e := kubeletSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := e.s.Clientset(t, false)
	factory := informers.NewSharedInformerFactory(cs, 0)
	nlc, err := nodelifecycle.New(cs, factory, nodelifecycle.Options{GracePeriod: 3 * time.Second, MonitorPeriod: 200 * time.Millisecond, Logger: testserver.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); nlc.Run(ctx) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	// DefaultTolerationSeconds gives every pod 300 s on an unreachable node, as in
	// Kubernetes; the victim asks to be evicted at once.
	now := int64(0)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Spec: corev1.PodSpec{Containers: []corev1.Container{container("c", "counter", "1s")},
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &now}}}})
	tolerant := int64(3600)
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tolerant"}, Spec: corev1.PodSpec{Containers: []corev1.Container{container("c", "counter", "1s")},
		Tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &tolerant}}}})
	e.waitPod("victim", "Running", 180*time.Second, running)
	e.waitPod("tolerant", "Running", 180*time.Second, running)
	e.stopKubelet()
	e.poll(30*time.Second, "node NotReady and tainted", func(ctx context.Context) (bool, error) {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		unknown := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
				unknown = true
			}
		}
		taints := 0
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeUnreachable {
				taints++
			}
		}
		return unknown && taints == 2, nil
	})
	e.waitPod("victim", "evicted", 30*time.Second, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	tp := e.waitPod("tolerant", "marked not ready", 30*time.Second, func(p *corev1.Pod) bool { return !ready(p) })
	if tp.DeletionTimestamp != nil {
		t.Errorf("pod tolerating unreachable for 1h was evicted")
	}
	// The kubelet coming back makes the node Ready and untainted again.
	e.startKubelet()
	e.poll(30*time.Second, "node Ready and untainted", func(ctx context.Context) (bool, error) {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeUnreachable {
				return false, nil
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}
