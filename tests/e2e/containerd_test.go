package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/kubelet"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis"
)

// Images the containerd test builds and imports: the sandbox ("pause") image its
// containerd config names, and busybox-static.
const (
	ctrdPauseImage   = "wasmplane.test/pause:e2e"
	ctrdBusyboxImage = "wasmplane.test/busybox:e2e"
	ctrdNamespace    = "k8s.io" // the containerd namespace of the CRI plugin
)

// containerdConfig is containerd 1.6's config for a machine without systemd and without
// CAP_SYS_RESOURCE: cgroupfs (SystemdCgroup = false), everything under one temp dir,
// restrict_oom_score_adj (runc cannot lower the OOM score adjustment without
// CAP_SYS_RESOURCE), no AppArmor, and runc's own state dir kept private to this instance.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[4]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %[5]q
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`

// containerd is a containerd daemon the test started, with its own root, state and socket.
type containerd struct {
	t       *testing.T
	dir     string
	sock    string
	log     string
	snap    string
	cmd     *exec.Cmd
	done    chan struct{}
	runtime cri.RuntimeService
}

// TestContainerd runs the kubelet of `wasmplane up` against containerd (CRI plugin +
// runc) instead of the built-in WASI runtime: a hostNetwork busybox pod reaches Running,
// `kubectl logs` shows its output, and deleting it stops and removes its containers.
func TestContainerd(t *testing.T) {
	for _, bin := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed (run scripts/install-containerd.sh): %v", bin, err)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("busybox-static is not installed (run scripts/install-containerd.sh): %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("containerd and runc need root; this test runs as uid %d", os.Geteuid())
	}
	start := time.Now()
	ctrd := startContainerd(t)
	ctrd.importImages()
	t.Logf("containerd up with images in %s", time.Since(start).Round(time.Millisecond))

	c := newClusterWith(t, "--container-runtime-endpoint", "unix://"+ctrd.sock)
	kc := c.adminKubeconfig()

	// The node reports containerd as its runtime.
	waitfor.Condition(t, 60*time.Second, "the node to be Ready on containerd", func(ctx context.Context) (bool, error) {
		nodes, err := c.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 {
			return false, nil
		}
		n := nodes.Items[0]
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			return false, fmt.Errorf("node %s runs %q, want containerd://…", n.Name, n.Status.NodeInfo.ContainerRuntimeVersion)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})

	// "$$$$" reaches the shell as "$$": the kubelet expands "$$" to "$", as Kubernetes does.
	const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: busybox
  namespace: default
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + ctrdBusyboxImage + `
    imagePullPolicy: Never
    command: ["sh", "-c", "echo hello from containerd; echo pid $$$$ host $(hostname); exec sleep 3600"]
`
	created := time.Now()
	c.mustKubectl(kc, manifest, "apply", "-f", "-")
	var pod *corev1.Pod
	waitfor.Condition(t, 90*time.Second, "pod busybox to be Running", func(ctx context.Context) (bool, error) {
		p, err := c.admin.CoreV1().Pods("default").Get(ctx, "busybox", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
				return false, fmt.Errorf("container %s is waiting: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
		pod = p
		return podRunning(p), nil
	})
	t.Logf("pod Running %s after apply", time.Since(created).Round(time.Millisecond))
	if len(pod.Status.ContainerStatuses) != 1 || !strings.HasPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Fatalf("container statuses %+v: want one containerd:// container", pod.Status.ContainerStatuses)
	}
	containerID := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if pod.Status.PodIP == "" {
		t.Errorf("a hostNetwork pod has no podIP")
	}

	// The container is really running under runc: containerd's task list has it.
	if out := ctrd.ctr("tasks", "list"); !strings.Contains(out, containerID) || !strings.Contains(out, "RUNNING") {
		t.Fatalf("ctr tasks list does not show %s running:\n%s", containerID, out)
	}

	var logs string
	waitfor.Condition(t, 30*time.Second, "kubectl logs to show the container's output", func(context.Context) (bool, error) {
		out, err := c.kubectl(kc, "", "logs", "busybox", "-c", "main")
		if err != nil {
			t.Logf("kubectl logs: %v", err)
			return false, nil
		}
		logs = out
		return strings.Contains(out, "hello from containerd") && strings.Contains(out, "pid "), nil
	})
	// The container has a PID namespace of its own (it is PID 1 there, not a child of the
	// sandbox's pause) and, on the host network, the node's hostname.
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if want := "pid 1 host " + host; !strings.Contains(logs, want) {
		t.Fatalf("kubectl logs:\n%s\nwant a line %q", logs, want)
	}

	deleted := time.Now()
	c.mustKubectl(kc, "", "delete", "pod", "busybox", "--wait=false")
	waitfor.Condition(t, 60*time.Second, "pod busybox to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.admin.CoreV1().Pods("default").Get(ctx, "busybox", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	t.Logf("pod gone %s after delete", time.Since(deleted).Round(time.Millisecond))
	// The kubelet removes the pod's containers and sandbox from containerd after the object is gone.
	waitfor.Condition(t, 30*time.Second, "containerd to have no container or sandbox left", func(ctx context.Context) (bool, error) {
		cts, err := ctrd.runtime.ListContainers(ctx, nil)
		if err != nil {
			return false, err
		}
		sbs, err := ctrd.runtime.ListPodSandbox(ctx, nil)
		if err != nil {
			return false, err
		}
		return len(cts) == 0 && len(sbs) == 0, nil
	})
	if out := ctrd.ctr("tasks", "list"); strings.Contains(out, containerID) {
		t.Fatalf("ctr tasks list still shows %s:\n%s", containerID, out)
	}
}

// startContainerd starts containerd on a config of its own under a temp dir and waits until
// its CRI service answers. When the test ends, every sandbox left is stopped and removed,
// containerd is stopped, and the shims it started are killed.
func startContainerd(t *testing.T) *containerd {
	t.Helper()
	dir := t.TempDir()
	c := &containerd{t: t, dir: dir, sock: filepath.Join(dir, "containerd.sock"), log: filepath.Join(dir, "containerd.log"),
		snap: "overlayfs", done: make(chan struct{})}
	if !overlayWorks(t, dir) {
		// Nested overlay mounts are refused on some filesystems; native copies layers.
		c.snap = "native"
	}
	for _, d := range []string{"cni/bin", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf(containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, ctrdPauseImage, c.snap,
		filepath.Join(dir, "state", "runc"), filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "net.d"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("containerd", "--config", conf, "--log-level", "info")
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// Its own process group, so that a kill reaches nothing of the test's.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting containerd: %v", err)
	}
	go func() {
		_ = c.cmd.Wait()
		_ = logFile.Close()
		close(c.done)
	}()
	t.Cleanup(c.stop)

	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.done:
			t.Fatalf("containerd exited (%v):\n%s", c.cmd.ProcessState, tail(c.log, 30))
		default:
		}
		if _, err := os.Stat(c.sock); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rt, _, err := kubelet.Connect(ctx, "unix://"+c.sock)
			if err == nil {
				_, err = rt.Version(ctx, "v1")
			}
			cancel()
			if err == nil {
				c.runtime = rt
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("containerd's CRI service never answered on %s: %v\n%s", c.sock, err, tail(c.log, 30))
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("containerd never created %s:\n%s", c.sock, tail(c.log, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	v, err := c.runtime.Version(context.Background(), "v1")
	if err != nil {
		t.Fatalf("containerd's CRI version: %v", err)
	}
	t.Logf("%s %s (CRI %s) on %s, snapshotter %s", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion(), c.sock, c.snap)
	return c
}

// overlayWorks tells whether an overlay mount can be made under dir.
func overlayWorks(t *testing.T, dir string) bool {
	t.Helper()
	base := filepath.Join(dir, "overlay-probe")
	var ps []string
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		p := filepath.Join(base, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	defer func() { _ = os.RemoveAll(base) }()
	if err := syscall.Mount("overlay", ps[3], "overlay", 0, "lowerdir="+ps[0]+",upperdir="+ps[1]+",workdir="+ps[2]); err != nil {
		t.Logf("overlay mount refused (%v): using the native snapshotter", err)
		return false
	}
	_ = syscall.Unmount(ps[3], 0)
	return true
}

// ctr runs `ctr -n k8s.io --address SOCK args…` and returns its output; failure fails the test.
func (c *containerd) ctr(args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"-n", ctrdNamespace, "--address", c.sock}, args...)
	out, err := exec.CommandContext(ctx, "ctr", full...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// importImages builds the pause and busybox images as OCI archives and imports them into
// containerd's k8s.io namespace, where its CRI plugin finds them: no registry is needed.
func (c *containerd) importImages() {
	c.t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		c.t.Fatal(err)
	}
	pause := buildPause(c.t, c.dir)
	dirs := []ociFile{{Path: "bin/"}, {Path: "etc/"}, {Path: "tmp/", Mode: 0o1777}, {Path: "proc/"}, {Path: "sys/"}, {Path: "dev/"}}
	bb := append([]ociFile{}, dirs...)
	bb = append(bb, ociFile{Path: "bin/busybox", Body: busybox})
	for _, applet := range []string{"sh", "echo", "sleep", "cat", "ls", "ps", "true", "false", "env", "id", "hostname"} {
		bb = append(bb, ociFile{Path: "bin/" + applet, Link: "busybox"})
	}
	images := map[string]ociImage{
		"pause.tar":   {Name: ctrdPauseImage, Entrypoint: []string{"/pause"}, Files: []ociFile{{Path: "pause", Body: pause}}},
		"busybox.tar": {Name: ctrdBusyboxImage, Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}, Files: bb},
	}
	for file, img := range images {
		p := filepath.Join(c.dir, file)
		if err := writeOCIArchive(p, img); err != nil {
			c.t.Fatal(err)
		}
		c.ctr("images", "import", "--all-platforms", "--snapshotter", c.snap, p)
	}
	out := c.ctr("images", "list", "-q")
	for _, img := range images {
		if !strings.Contains(out, img.Name) {
			c.t.Fatalf("ctr images list lacks %s after the import:\n%s", img.Name, out)
		}
	}
}

// pauseSource is the sandbox's process: it holds the pod's namespaces and exits on
// SIGTERM or SIGINT.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
`

// buildPause compiles the pause program as a static binary and returns it.
func buildPause(t *testing.T, dir string) []byte {
	t.Helper()
	src := filepath.Join(dir, "pause-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"go.mod": "module pause\n\ngo 1.21\n", "main.go": pauseSource} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "pause")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the pause binary: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stop removes every sandbox left (so that no mount or shim outlives the test), stops
// containerd, kills the shims it started, and unmounts anything left under its dirs.
func (c *containerd) stop() {
	t := c.t
	if c.runtime != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if sbs, err := c.runtime.ListPodSandbox(ctx, nil); err == nil {
			for _, sb := range sbs {
				if err := c.runtime.StopPodSandbox(ctx, sb.GetId()); err != nil {
					t.Logf("stopping sandbox %s: %v", sb.GetId(), err)
				}
				if err := c.runtime.RemovePodSandbox(ctx, sb.GetId()); err != nil {
					t.Logf("removing sandbox %s: %v", sb.GetId(), err)
				}
			}
		}
		_ = c.runtime.Close(ctx)
		cancel()
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
	// Shims run in process groups of their own and outlive containerd; ours name our socket.
	for _, pid := range shimsOf(c.sock) {
		t.Logf("killing containerd-shim-runc-v2 %d left by the test", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	unmountUnder(t, c.dir)
	if t.Failed() {
		t.Logf("last lines of %s:\n%s", c.log, tail(c.log, 40))
	}
}

// shimsOf lists the containerd-shim-runc-v2 processes started for the containerd on sock.
func shimsOf(sock string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == sock {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount below dir, deepest first, so that the temp dir can go.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		t.Logf("unmounting %s left behind", points[i])
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Logf("unmounting %s: %v", points[i], err)
		}
	}
}
