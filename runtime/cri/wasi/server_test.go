package wasi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
	utilexec "k8s.io/utils/exec"
)

func TestVersionAndStatus(t *testing.T) {
	e := newEnv(t)
	v, err := e.rt.Version(ctxT(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "wasmplane-wasi" || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %v", v)
	}
	st, err := e.rt.Status(ctxT(t), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, c := range st.Status.Conditions {
		ready[c.Type] = c.Status
	}
	if !ready[runtimeapi.RuntimeReady] || !ready[runtimeapi.NetworkReady] {
		t.Errorf("conditions = %v, want RuntimeReady and NetworkReady true", st.Status.Conditions)
	}
	// Streaming exec itself is tested end to end in tests/e2e (TestExec).
	for _, tc := range []struct {
		req  *runtimeapi.ExecRequest
		code codes.Code
		msg  string
	}{
		{&runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"sh"}, Stdout: true}, codes.NotFound, ""},
		{&runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"sh"}, Stdout: true, Tty: true}, codes.InvalidArgument, "no terminal"},
	} {
		_, err = e.rt.Exec(ctxT(t), tc.req)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Exec(%v) error = %v, want %v %q", tc.req, err, tc.code, tc.msg)
		}
	}
}

func TestImageService(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	id := e.importWorkload(t, "hello", "hello:v1")

	list, err := e.img.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Images) != 1 || list.Images[0].Id != id || !slices.Equal(list.Images[0].RepoTags, []string{"docker.io/library/hello:v1"}) {
		t.Fatalf("ListImages = %v", list.Images)
	}
	if got := list.Images[0].RepoDigests; len(got) != 1 || got[0] != "docker.io/library/hello@"+id {
		t.Errorf("RepoDigests = %v", got)
	}

	for _, ref := range []string{"hello:v1", "docker.io/library/hello:v1", id, strings.TrimPrefix(id, "sha256:")[:12], "hello@" + id} {
		st, err := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Image == nil || st.Image.Id != id || st.Image.Size == 0 {
			t.Errorf("ImageStatus(%q) = %v", ref, st.Image)
		}
		pull, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || pull.ImageRef != id {
			t.Errorf("PullImage(%q) = %v, %v", ref, pull, err)
		}
	}
	st, err := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "hello:latest"}})
	if err != nil || st.Image != nil {
		t.Errorf("ImageStatus(hello:latest) = %v, %v; want nil image", st.GetImage(), err)
	}
	filtered, err := e.img.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "nope"}}})
	if err != nil || len(filtered.Images) != 0 {
		t.Errorf("filtered ListImages = %v, %v", filtered.GetImages(), err)
	}

	_, err = e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "registry.example/missing:1"}})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "wasmplane image import") {
		t.Errorf("PullImage(missing) error = %v, want NotFound mentioning `wasmplane image import`", err)
	}

	counter := workload(t, "counter")
	pull, err := e.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "file://" + counter}})
	if err != nil {
		t.Fatalf("PullImage(file://): %v", err)
	}
	if st, _ := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: pull.ImageRef}}); st.GetImage() == nil {
		t.Errorf("file:// pulled image %s not in store", pull.ImageRef)
	}

	fs, err := e.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fs.ImageFilesystems) != 1 || fs.ImageFilesystems[0].UsedBytes.Value == 0 {
		t.Errorf("ImageFsInfo = %v, %v", fs, err)
	}

	for range 2 { // idempotent
		if _, err := e.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: "hello:v1"}}); err != nil {
			t.Fatalf("RemoveImage: %v", err)
		}
	}
	if st, _ := e.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: id}}); st.GetImage() != nil {
		t.Errorf("image still present after RemoveImage")
	}
}

func TestSandboxLifecycle(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	a := e.runSandbox(t, "a", map[string]string{"app": "web"})
	b := e.runSandbox(t, "b", map[string]string{"app": "db"})

	_, err := e.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "a", Uid: "uid-a", Namespace: "default"},
	}})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("duplicate RunPodSandbox error = %v, want AlreadyExists", err)
	}

	st, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: a})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || st.Status.Metadata.Name != "a" || st.Status.Labels["app"] != "web" || st.Status.CreatedAt == 0 {
		t.Errorf("PodSandboxStatus = %v", st.Status)
	}
	if ip := st.Status.GetNetwork().GetIp(); ip != "" {
		t.Errorf("sandbox IP = %q, want none", ip)
	}

	if _, err := e.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"all", nil, []string{a, b}},
		{"by id prefix", &runtimeapi.PodSandboxFilter{Id: b[:8]}, []string{b}},
		{"ready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}, []string{b}},
		{"notready", &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}}, []string{a}},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "web"}}, []string{a}},
		{"label miss", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range resp.Items {
				got = append(got, it.Id)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	for range 2 { // idempotent
		if _, err := e.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: a}); err != nil {
			t.Fatalf("RemovePodSandbox: %v", err)
		}
	}
	if _, err := e.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: a}); status.Code(err) != codes.NotFound {
		t.Errorf("status of removed sandbox: %v, want NotFound", err)
	}
}

func TestContainerRunAndLogs(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "hello", "hello")
	e.importWorkload(t, "crash", "crash")
	e.importWorkload(t, "toolbox", "toolbox")
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := e.runSandbox(t, "pod", nil)

	tests := []struct {
		name       string
		opts       ctrOpts
		wantCode   int32
		wantReason string
		wantStdout []string
		wantStderr []string
	}{
		{
			name:       "hello",
			opts:       ctrOpts{image: "hello", args: []string{"a", "b"}, envs: map[string]string{"GREETING": "hi"}},
			wantReason: "Completed",
			wantStdout: []string{"hello from wasmplane", "args: a b", "greeting: hi"},
			wantStderr: []string{"hello on stderr"},
		},
		{
			name:       "crash",
			opts:       ctrOpts{image: "docker.io/library/crash:latest"},
			wantCode:   1,
			wantReason: "Error",
			wantStderr: []string{"crash: something went wrong, exiting 1"},
		},
		{
			name:       "exit-code",
			opts:       ctrOpts{image: "toolbox", command: []string{"toolbox", "exit", "42"}},
			wantCode:   42,
			wantReason: "Error",
		},
		{
			name:       "workdir",
			opts:       ctrOpts{image: "toolbox", args: []string{"pwd"}, workdir: "/work/dir"},
			wantReason: "Completed",
			wantStdout: []string{"/work/dir"},
		},
		{
			name: "read-only-mount",
			opts: ctrOpts{image: "toolbox", args: []string{"cat", "/data/in.txt"},
				mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: hostDir, Readonly: true}}},
			wantReason: "Completed",
			wantStdout: []string{"from the host"},
		},
		{
			name: "read-only-mount-refuses-writes",
			opts: ctrOpts{image: "toolbox", args: []string{"write", "/data/out.txt", "x"},
				mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: hostDir, Readonly: true}}},
			wantCode:   1,
			wantReason: "Error",
		},
		{
			name: "writable-mount",
			opts: ctrOpts{image: "toolbox", args: []string{"write", "/data/rw.txt", "written"},
				mounts: []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: hostDir}}},
			wantReason: "Completed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.createContainer(t, sb, tc.name, tc.opts)
			if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
				t.Fatalf("state after create = %v", st.State)
			}
			e.start(t, id)
			st := e.waitExited(t, id)
			if st.ExitCode != tc.wantCode || st.Reason != tc.wantReason {
				t.Errorf("exit = %d %q (%s), want %d %q", st.ExitCode, st.Reason, st.Message, tc.wantCode, tc.wantReason)
			}
			if st.StartedAt == 0 || st.FinishedAt < st.StartedAt || st.CreatedAt > st.StartedAt {
				t.Errorf("timestamps created=%d started=%d finished=%d", st.CreatedAt, st.StartedAt, st.FinishedAt)
			}
			want := filepath.Join(e.logs, "pod", tc.name, "0.log")
			if st.LogPath != want {
				t.Errorf("LogPath = %q, want %q", st.LogPath, want)
			}
			lines := readCRILog(t, st.LogPath)
			for _, l := range lines {
				if l.tag != "F" {
					t.Errorf("unexpected tag in %+v", l)
				}
			}
			if got := messages(lines, "stdout"); tc.wantStdout != nil && !slices.Equal(got, tc.wantStdout) {
				t.Errorf("stdout = %q, want %q\n%s", got, tc.wantStdout, fmtLines(lines))
			}
			if got := messages(lines, "stderr"); tc.wantStderr != nil && !slices.Equal(got, tc.wantStderr) {
				t.Errorf("stderr = %q, want %q", got, tc.wantStderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(hostDir, "rw.txt")); err != nil || string(b) != "written" {
		t.Errorf("writable mount: host file = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "out.txt")); err == nil {
		t.Errorf("read-only mount was written")
	}

	list, err := e.rt.ListContainers(ctxT(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}, PodSandboxId: sb,
	}})
	if err != nil || len(list.Containers) != len(tests) {
		t.Errorf("ListContainers(exited) = %d containers, %v; want %d", len(list.GetContainers()), err, len(tests))
	}

	_, err = e.rt.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "missing"}, Image: &runtimeapi.ImageSpec{Image: "nothere:1"},
	}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("CreateContainer with missing image: %v, want NotFound", err)
	}
}

func TestStopForeverContainer(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "counter", "counter")
	e.importWorkload(t, "sleeper", "sleeper")
	sb := e.runSandbox(t, "pod", nil)
	tests := []struct {
		name  string
		image string
		args  []string
	}{
		{"busy-printing", "counter", []string{"20ms"}},
		{"idle-in-sleep", "sleeper", nil}, // blocked in poll_oneoff for an hour
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.createContainer(t, sb, tc.name, ctrOpts{image: tc.image, args: tc.args})
			e.start(t, id)
			if tc.image == "counter" {
				waitFor(t, 20*time.Second, "counter output", func() bool {
					b, _ := os.ReadFile(e.status(t, id).LogPath)
					return strings.Count(string(b), "\n") >= 3
				})
			}
			if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("state = %v, want running", st.State)
			}
			// The guest is killed at once, long before the 10 s grace: the call has 5 s.
			stopCtx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
			defer cancel()
			if _, err := e.rt.StopContainer(stopCtx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 10}); err != nil {
				t.Fatal(err)
			}
			st := e.status(t, id) // StopContainer returns after the guest is gone
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
				t.Errorf("after stop: state %v exit %d", st.State, st.ExitCode)
			}
			if _, err := e.rt.StopContainer(ctxT(t), &runtimeapi.StopContainerRequest{ContainerId: id}); err != nil {
				t.Errorf("second StopContainer: %v", err)
			}
			if tc.image == "counter" {
				lines := readCRILog(t, st.LogPath)
				for i, m := range messages(lines, "stdout") {
					if want := "count " + strconv.Itoa(i); m != want {
						t.Fatalf("line %d = %q, want %q", i, m, want)
					}
				}
			}
		})
	}
	// RemovePodSandbox removes a running container too.
	id := e.createContainer(t, sb, "left-running", ctrOpts{image: "sleeper"})
	e.start(t, id)
	if _, err := e.rt.RemovePodSandbox(ctxT(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.ContainerStatus(ctxT(t), &runtimeapi.ContainerStatusRequest{ContainerId: id}); status.Code(err) != codes.NotFound {
		t.Errorf("container of removed sandbox: %v, want NotFound", err)
	}
}

func TestExecSync(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "toolbox", "toolbox")
	sb := e.runSandbox(t, "pod", nil)
	id := e.createContainer(t, sb, "main", ctrOpts{image: "toolbox", args: []string{"sleep", "1h"}, envs: map[string]string{"MODE": "test"}})

	_, err := e.rt.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"toolbox", "echo", "x"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("ExecSync on a created container: %v, want FailedPrecondition", err)
	}
	e.start(t, id)

	// The kubelet's own CRI client, as exec probes use it.
	client, err := remote.NewRemoteRuntimeService(ctxT(t), e.s.Endpoint(), 10*time.Second, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		cmd      []string
		wantOut  string
		wantCode int32
	}{
		{"echo", []string{"toolbox", "echo", "hello", "exec"}, "hello exec\n", 0},
		{"env is the container's", []string{"toolbox", "env"}, "MODE=test\n", 0},
		{"exit code", []string{"toolbox", "exit", "7"}, "", 7},
		{"write to scratch", []string{"toolbox", "write", "/shared.txt", "kept"}, "", 0},
		{"read it back (same scratch dir)", []string{"toolbox", "cat", "/shared.txt"}, "kept", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := client.ExecSync(ctxT(t), id, tc.cmd, 10*time.Second)
			var code int32
			if err != nil {
				var ee utilexec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("ExecSync: %v", err)
				}
				code = int32(ee.ExitStatus())
			}
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", code, tc.wantCode)
			}
			if !strings.Contains(string(stdout), tc.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", stdout, tc.wantOut)
			}
		})
	}

	// The exec's own 1 s timeout ends it, well before the caller's 10 s deadline.
	execCtx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	_, err = e.rt.ExecSync(execCtx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"toolbox", "sleep", "1m"}, Timeout: 1})
	if status.Code(err) != codes.DeadlineExceeded || execCtx.Err() != nil {
		t.Errorf("ExecSync past its timeout: %v (caller's deadline: %v), want DeadlineExceeded from the exec's timeout", err, execCtx.Err())
	}
	if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("main container state after execs = %v", st.State)
	}
}

func TestMemoryLimit(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "toolbox", "toolbox")
	e.importWorkload(t, "sleeper", "sleeper")
	sb := e.runSandbox(t, "pod", nil)
	tests := []struct {
		name       string
		limit      int64
		mib        string
		wantCode   int32
		wantReason string
	}{
		{"within limit", 128 << 20, "16", 0, "Completed"},
		{"over limit", 48 << 20, "96", 137, "OOMKilled"},
		{"default cap 256MiB", 0, "400", 137, "OOMKilled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.createContainer(t, sb, strings.ReplaceAll(tc.name, " ", "-"), ctrOpts{image: "toolbox", args: []string{"alloc", tc.mib}, memory: tc.limit})
			e.start(t, id)
			st := e.waitExited(t, id)
			if st.ExitCode != tc.wantCode || st.Reason != tc.wantReason {
				t.Errorf("exit = %d %q (%s), want %d %q", st.ExitCode, st.Reason, st.Message, tc.wantCode, tc.wantReason)
			}
		})
	}
	id := e.createContainer(t, sb, "stats", ctrOpts{image: "sleeper", memory: 64 << 20})
	e.start(t, id)
	resp, err := e.rt.ContainerStats(ctxT(t), &runtimeapi.ContainerStatsRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	ws := resp.Stats.Memory.WorkingSetBytes.Value
	if ws == 0 || ws > 64<<20 || ws%pageSize != 0 {
		t.Errorf("working set = %d, want guest memory size within the limit", ws)
	}
}

func TestRestartPersistence(t *testing.T) {
	root := shortTempDir(t)
	e := startServer(t, root)
	e.importWorkload(t, "counter", "counter")
	e.importWorkload(t, "hello", "hello")
	sb := e.runSandbox(t, "pod", map[string]string{"k": "v"})
	running := e.createContainer(t, sb, "running", ctrOpts{image: "counter"})
	e.start(t, running)
	done := e.createContainer(t, sb, "done", ctrOpts{image: "hello"})
	e.start(t, done)
	e.waitExited(t, done)
	created := e.createContainer(t, sb, "created", ctrOpts{image: "hello"})
	if err := e.s.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := startServer(t, root)
	ctx := ctxT(t)
	ps, err := e2.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil || ps.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY || ps.Status.Labels["k"] != "v" {
		t.Fatalf("sandbox after restart: %v, %v", ps.GetStatus(), err)
	}
	tests := []struct {
		id         string
		wantState  runtimeapi.ContainerState
		wantCode   int32
		wantReason string
	}{
		{running, runtimeapi.ContainerState_CONTAINER_EXITED, 255, "RuntimeRestarted"},
		{done, runtimeapi.ContainerState_CONTAINER_EXITED, 0, "Completed"},
		{created, runtimeapi.ContainerState_CONTAINER_CREATED, 0, ""},
	}
	for _, tc := range tests {
		st := e2.status(t, tc.id)
		if st.State != tc.wantState || st.ExitCode != tc.wantCode || st.Reason != tc.wantReason {
			t.Errorf("container %s: %v %d %q, want %v %d %q", st.Metadata.Name, st.State, st.ExitCode, st.Reason, tc.wantState, tc.wantCode, tc.wantReason)
		}
	}
	e2.start(t, created)
	if st := e2.waitExited(t, created); st.ExitCode != 0 {
		t.Errorf("container created before the restart exited %d", st.ExitCode)
	}
	if im, err := e2.s.Images().Resolve("hello"); err != nil || im.ID == "" {
		t.Errorf("image lost across restart: %v", err)
	}
	// Names stay reserved across the restart.
	_, err = e2.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "done"}, Image: &runtimeapi.ImageSpec{Image: "hello"},
	}})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("re-creating a reserved name: %v, want AlreadyExists", err)
	}
}

func TestContainerEvents(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "hello", "hello")
	sb := e.runSandbox(t, "pod", nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stream, err := e.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The subscription is registered asynchronously; create until the first event arrives.
	events := make(chan *runtimeapi.ContainerEventResponse, 16)
	go func() {
		defer close(events)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	waitFor(t, 10*time.Second, "event subscription", func() bool {
		e.s.mu.Lock()
		defer e.s.mu.Unlock()
		return len(e.s.subs) == 1
	})
	id := e.createContainer(t, sb, "c", ctrOpts{image: "hello"})
	e.start(t, id)
	e.waitExited(t, id)
	if _, err := e.rt.RemoveContainer(ctxT(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	want := []runtimeapi.ContainerEventType{
		runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
	}
	timeout := time.After(10 * time.Second)
	for i, w := range want {
		select {
		case ev := <-events:
			if ev.ContainerId != id || ev.ContainerEventType != w {
				t.Fatalf("event %d = %v %s, want %v %s", i, ev.ContainerEventType, ev.ContainerId, w, id)
			}
			if ev.PodSandboxStatus.GetId() != sb || len(ev.ContainersStatuses) != 1 {
				t.Errorf("event %d lacks sandbox or container status", i)
			}
			if w == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT && ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
				t.Errorf("stopped event carries state %v", ev.ContainersStatuses[0].State)
			}
		case <-timeout:
			t.Fatalf("timed out waiting for event %v", w)
		}
	}
}

// TestManyPods runs 110 pods (the kubelet's default max) at once.
func TestManyPods(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "hello", "hello")
	const n = 110
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			sb := e.runSandbox(t, "pod-"+strconv.Itoa(i), nil)
			ids[i] = e.createContainer(t, sb, "c", ctrOpts{image: "hello", args: []string{strconv.Itoa(i)}})
			e.start(t, ids[i])
		})
	}
	wg.Wait()
	for i, id := range ids {
		st := e.waitExited(t, id)
		if st.ExitCode != 0 {
			t.Errorf("pod %d exited %d %s", i, st.ExitCode, st.Message)
			continue
		}
		if got := messages(readCRILog(t, st.LogPath), "stdout"); len(got) < 2 || got[1] != "args: "+strconv.Itoa(i) {
			t.Errorf("pod %d stdout = %q", i, got)
		}
	}
}

func TestEtcFilesAndReadonlyRootfs(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "toolbox", "toolbox")
	resp, err := e.rt.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "pod", Uid: "u", Namespace: "default"},
		Hostname:     "web-0",
		LogDirectory: filepath.Join(e.logs, "pod"),
		DnsConfig:    &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"default.svc.cluster.local"}, Options: []string{"ndots:5"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sb := resp.PodSandboxId
	tests := []struct {
		name       string
		opts       ctrOpts
		wantCode   int32
		wantStdout []string
		wantStderr []string
	}{
		{"hostname", ctrOpts{image: "toolbox", command: []string{"hostname"}}, 0, []string{"web-0"}, nil},
		{"hostname-env", ctrOpts{image: "toolbox", args: []string{"sh", "-c", "env"}}, 0, nil, nil},
		{"resolv.conf", ctrOpts{image: "toolbox", command: []string{"cat", "/etc/resolv.conf"}}, 0,
			[]string{"nameserver 10.0.0.10", "search default.svc.cluster.local", "options ndots:5"}, nil},
		{"writable-rootfs", ctrOpts{image: "toolbox", command: []string{"sh", "-c", "touch test.go && [ -f test.go ] && echo 'Found'"}}, 0, []string{"Found"}, nil},
		{"readonly-rootfs", ctrOpts{image: "toolbox", readonly: true, command: []string{"sh", "-c", "touch test.go && [ -f test.go ] && echo 'Found'"}}, 1,
			nil, []string{"touch: test.go: Read-only file system"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := e.createContainer(t, sb, tc.name, tc.opts)
			e.start(t, id)
			st := e.waitExited(t, id)
			if st.ExitCode != tc.wantCode {
				t.Errorf("exit code %d (%s), want %d", st.ExitCode, st.Message, tc.wantCode)
			}
			lines := readCRILog(t, st.LogPath)
			if got := messages(lines, "stdout"); tc.wantStdout != nil && !slices.Equal(got, tc.wantStdout) {
				t.Errorf("stdout = %q, want %q", got, tc.wantStdout)
			}
			if got := messages(lines, "stderr"); tc.wantStderr != nil && !slices.Equal(got, tc.wantStderr) {
				t.Errorf("stderr = %q, want %q", got, tc.wantStderr)
			}
			if tc.name == "hostname-env" && !slices.Contains(messages(lines, "stdout"), "HOSTNAME=web-0") {
				t.Errorf("HOSTNAME not in the environment: %q", messages(lines, "stdout"))
			}
		})
	}
}

func TestStreamingListsMatchLists(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "hello", "hello")
	for i := range 3 {
		sb := e.runSandbox(t, "pod-"+strconv.Itoa(i), nil)
		e.createContainer(t, sb, "c", ctrOpts{image: "hello"})
	}
	ctx := ctxT(t)
	ps, err := e.rt.StreamPodSandboxes(ctx, &runtimeapi.StreamPodSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		r, err := ps.Recv()
		if err != nil {
			break
		}
		n += len(r.PodSandboxes)
	}
	if n != 3 {
		t.Errorf("StreamPodSandboxes sent %d sandboxes, want 3", n)
	}
	cs, err := e.rt.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n = 0
	for {
		r, err := cs.Recv()
		if err != nil {
			break
		}
		n += len(r.Containers)
	}
	if n != 3 {
		t.Errorf("StreamContainers sent %d containers, want 3", n)
	}
	stats, err := e.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil || len(stats.Stats) != 3 {
		t.Errorf("ListPodSandboxStats = %d, %v", len(stats.GetStats()), err)
	}
}

// Hand-assembled modules: `_start` executing `unreachable`, and a module exporting nothing.
var (
	trapModule = []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: () -> ()
		0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
		0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // export "_start"
		0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // code: unreachable; end
	}
	reactorModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00}
)

func TestTrapAndNonCommandModules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.s.Images().Import(ctx, bytes.NewReader(trapModule), "trap"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Images().Import(ctx, bytes.NewReader(reactorModule), "reactor"); err != nil {
		t.Fatal(err)
	}
	sb := e.runSandbox(t, "pod", nil)

	id := e.createContainer(t, sb, "trap", ctrOpts{image: "trap"})
	e.start(t, id)
	st := e.waitExited(t, id)
	if st.ExitCode != 134 || st.Reason != "Error" || !strings.Contains(st.Message, "unreachable") {
		t.Errorf("trap: exit %d %q %q, want 134 Error with the trap message", st.ExitCode, st.Reason, st.Message)
	}

	id = e.createContainer(t, sb, "reactor", ctrOpts{image: "reactor"})
	_, err := e.rt.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	if err == nil || !strings.Contains(err.Error(), "_start") {
		t.Errorf("starting a module without _start: %v", err)
	}
	if st := e.status(t, id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.Reason != "StartError" {
		t.Errorf("after failed start: %v %q", st.State, st.Reason)
	}
}
