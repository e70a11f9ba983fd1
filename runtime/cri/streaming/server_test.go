package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// echoRuntime runs "cat" (stdin to stdout), "fail N" (writes to stderr, exits N),
// "block" (until its context ends, then closes blocked) and "broken" (cannot start).
type echoRuntime struct{ blocked chan struct{} }

func (r echoRuntime) Exec(ctx context.Context, id string, cmd []string, _ bool, s Streams) error {
	switch cmd[0] {
	case "cat":
		_, err := io.Copy(s.Stdout, s.Stdin)
		return err
	case "block":
		<-ctx.Done()
		close(r.blocked)
		return ctx.Err()
	case "fail":
		fmt.Fprintf(s.Stderr, "failing in %s\n", id)
		var code int
		fmt.Sscan(cmd[1], &code)
		return &ExitError{Code: code}
	}
	return errors.New("cannot start " + cmd[0])
}

// Attach says which container it is attached to, then copies stdin to stdout.
func (r echoRuntime) Attach(_ context.Context, id string, _ bool, s Streams) error {
	fmt.Fprintf(s.Stdout, "attached to %s\n", id)
	_, err := io.Copy(s.Stdout, s.Stdin)
	return err
}

func newTestServer(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	var s *Server
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.Handler().ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	u, _ := url.Parse(hs.URL)
	s = NewServer(echoRuntime{blocked: make(chan struct{})}, *u, slog.New(slog.DiscardHandler))
	return s, hs
}

func TestExecProtocols(t *testing.T) {
	s, _ := newTestServer(t)
	for _, proto := range []string{"websocket", "spdy"} {
		for _, tc := range []struct {
			cmd              []string
			stdin, out, serr string
			code             int
			err              string
		}{
			{cmd: []string{"cat"}, stdin: "hello\n", out: "hello\n"},
			{cmd: []string{"fail", "42"}, serr: "failing in c1\n", code: 42},
			{cmd: []string{"broken"}, err: "cannot start broken"},
		} {
			resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: tc.cmd, Stdin: true, Stdout: true, Stderr: true})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(resp.Url)
			var ex remotecommand.Executor
			if proto == "websocket" {
				ex, err = remotecommand.NewWebSocketExecutor(&rest.Config{Host: u.Host}, "GET", resp.Url)
			} else {
				ex, err = remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Host}, "POST", u)
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var out, serr bytes.Buffer
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &serr})
			cancel()
			code := 0
			var ce utilexec.CodeExitError
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s %v: error %v, want %q", proto, tc.cmd, err, tc.err)
				}
				continue
			case errors.As(err, &ce):
				code = ce.Code
			case err != nil:
				t.Fatalf("%s %v: %v", proto, tc.cmd, err)
			}
			if code != tc.code || out.String() != tc.out || serr.String() != tc.serr {
				t.Errorf("%s %v: code %d stdout %q stderr %q; want %d %q %q", proto, tc.cmd, code, out.String(), serr.String(), tc.code, tc.out, tc.serr)
			}
		}
	}
}

func TestGetExecValidation(t *testing.T) {
	s, _ := newTestServer(t)
	for _, tc := range []struct {
		name string
		req  *runtimeapi.ExecRequest
		code codes.Code
	}{
		{"ok", &runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}, Stdout: true}, codes.OK},
		{"no container", &runtimeapi.ExecRequest{Cmd: []string{"x"}, Stdout: true}, codes.InvalidArgument},
		{"no command", &runtimeapi.ExecRequest{ContainerId: "c", Stdout: true}, codes.InvalidArgument},
		{"no streams", &runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}}, codes.InvalidArgument},
		{"tty with stderr", &runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}, Tty: true, Stderr: true}, codes.InvalidArgument},
	} {
		resp, err := s.GetExec(tc.req)
		if got := status.Code(err); got != tc.code {
			t.Errorf("%s: code %v (%v), want %v", tc.name, got, err, tc.code)
		}
		if err == nil && !strings.Contains(resp.Url, "/exec/") {
			t.Errorf("%s: url %q", tc.name, resp.Url)
		}
	}
}

// TestTokens checks that a URL serves once and unknown ones get a 404 Status.
func TestTokens(t *testing.T) {
	s, hs := newTestServer(t)
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"cat"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{http.StatusBadRequest, http.StatusNotFound} {
		// Not an upgrade: the first use consumes the token and fails the protocol
		// handshake (400); the second finds no token.
		r, err := http.Post(resp.Url, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("use %d: %d %s, want %d", i, r.StatusCode, b, want)
		}
	}
	r, err := http.Get(hs.URL + "/exec/unknown")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"kind":"Status"`) {
		t.Errorf("unknown token: %d %s", r.StatusCode, b)
	}
}

// TestClientGoneEndsCommand checks that a command stops when its client disconnects, over
// both protocols.
func TestClientGoneEndsCommand(t *testing.T) {
	for _, proto := range []string{"websocket", "spdy"} {
		s, _ := newTestServer(t)
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"block"}, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(resp.Url)
		var ex remotecommand.Executor
		if proto == "websocket" {
			ex, err = remotecommand.NewWebSocketExecutor(&rest.Config{Host: u.Host}, "GET", resp.Url)
		} else {
			ex, err = remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Host}, "POST", u)
		}
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_ = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
		cancel()
		select {
		case <-s.rt.(echoRuntime).blocked:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the command still runs 10 s after its client left", proto)
		}
	}
}

// An attach URL runs the runtime's Attach with the client's streams, and a token is good
// only for the kind of request that got it.
func TestAttach(t *testing.T) {
	s, hs := newTestServer(t)
	resp, err := s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c1", Stdin: true, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Url, "/attach/") {
		t.Fatalf("attach URL %s", resp.Url)
	}
	wrong := strings.Replace(resp.Url, "/attach/", "/exec/", 1)
	if r, err := http.Post(wrong, "text/plain", nil); err != nil || r.StatusCode != http.StatusNotFound {
		t.Fatalf("an attach token used for exec: %v %v", r, err)
	}
	ex, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: strings.TrimPrefix(hs.URL, "http://")}, "GET", resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "attached to c1\ntyped\n" {
		t.Errorf("attach output %q", out.String())
	}
	if _, err := s.GetAttach(&runtimeapi.AttachRequest{Stdout: true}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("attach without a container: %v", err)
	}
}
