package wasi

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/runtime/cri/streaming"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// syncBuffer is a bytes.Buffer safe for the guest's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// An attached client feeds a stdin container and sees its output; with stdinOnce the end
// of its input is the guest's EOF. A guest waiting on stdin is still killed at once.
func TestAttach(t *testing.T) {
	e := newEnv(t)
	e.importWorkload(t, "toolbox", "toolbox")
	sb := e.runSandbox(t, "pod", nil)
	create := func(name string, once bool) string {
		resp, err := e.rt.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "toolbox"},
			Args: []string{"cat"}, Stdin: true, StdinOnce: once, LogPath: name + "/0.log"}})
		if err != nil {
			t.Fatal(err)
		}
		e.start(t, resp.ContainerId)
		return resp.ContainerId
	}

	once := create("once", true)
	if _, err := e.rt.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: once, Stdout: true, Tty: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("attach with a tty: %v, want InvalidArgument", err)
	}
	if resp, err := e.rt.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: once, Stdin: true, Stdout: true}); err != nil || !strings.Contains(resp.Url, "/attach/") {
		t.Fatalf("Attach: %v %v", resp, err)
	}
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := (execRunner{e.s}).Attach(ctx, once, false, streaming.Streams{Stdin: strings.NewReader("typed\n"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if st := e.waitExited(t, once); st.ExitCode != 0 || out.String() != "typed\n" {
		t.Errorf("exit %d, attached output %q", st.ExitCode, out.String())
	}
	lines := readCRILog(t, e.status(t, once).LogPath)
	if got := messages(lines, "stdout"); len(got) != 1 || got[0] != "typed" {
		t.Errorf("log %s", fmtLines(lines))
	}
	if _, err := e.rt.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: once, Stdout: true}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("attach to an exited container: %v, want FailedPrecondition", err)
	}

	waiting := create("waiting", false)
	// Blocked reading stdin, the guest is still killed long before the 30 s grace.
	stopCtx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	defer cancel()
	if _, err := e.rt.StopContainer(stopCtx, &runtimeapi.StopContainerRequest{ContainerId: waiting, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	if st := e.waitExited(t, waiting); st.ExitCode != 137 {
		t.Errorf("a guest reading stdin stopped with %d", st.ExitCode)
	}
}
