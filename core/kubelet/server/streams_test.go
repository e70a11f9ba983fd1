package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/runtime/cri/streaming"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeStreamer hands out URLs of a real streaming server whose runtime echoes the command.
type fakeStreamer struct {
	noLogs
	srv  *streaming.Server
	last StreamOptions
}

type noLogs struct{}

func (noLogs) ContainerLogFile(context.Context, string, string, string, bool) (string, func() bool, error) {
	return "", nil, NotFound("no logs")
}

func (f *fakeStreamer) ExecURL(_ context.Context, ns, pod, container string, cmd []string, opts StreamOptions) (*url.URL, error) {
	if container != "main" {
		return nil, NotFound("container not found (%q)", container)
	}
	f.last = opts
	resp, err := f.srv.GetExec(&runtimeapi.ExecRequest{ContainerId: ns + "/" + pod, Cmd: cmd, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	if err != nil {
		return nil, err
	}
	return url.Parse(resp.Url)
}

func (f *fakeStreamer) AttachURL(context.Context, string, string, string, StreamOptions) (*url.URL, error) {
	return nil, BadRequest("attach is not supported")
}

func (f *fakeStreamer) PortForwardURL(context.Context, string, string, []int32) (*url.URL, error) {
	return nil, BadRequest("port-forward is not supported")
}

type argvRuntime struct{}

func (argvRuntime) Exec(_ context.Context, id string, cmd []string, _ bool, s streaming.Streams) error {
	_, err := io.WriteString(s.Stdout, id+": "+strings.Join(cmd, " "))
	return err
}

// Attach is not reached: fakeStreamer refuses attach URLs, to test how errors are answered.
func (argvRuntime) Attach(context.Context, string, bool, streaming.Streams) error {
	return errors.New("attach is not served by this fake")
}

func TestStreamHandlers(t *testing.T) {
	rt := httptest.NewServer(nil)
	t.Cleanup(rt.Close)
	ru, _ := url.Parse(rt.URL)
	fs := &fakeStreamer{srv: streaming.NewServer(argvRuntime{}, *ru, slog.New(slog.DiscardHandler))}
	rt.Config.Handler = fs.srv.Handler()
	kl := httptest.NewServer(Handler(fs, slog.New(slog.DiscardHandler), Access{Anonymous: true}))
	t.Cleanup(kl.Close)

	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"POST", "/exec/ns/p/main?output=1", http.StatusBadRequest, "you must specify at least one command"},
		{"POST", "/exec/ns/p/main?command=ls", http.StatusBadRequest, "you must specify at least 1 of stdin, stdout, stderr"},
		{"POST", "/exec/ns/p/other?command=ls&output=1", http.StatusNotFound, `container not found ("other")`},
		{"POST", "/exec/ns/p/main?command=ls&output=1", http.StatusBadRequest, "Upgrade request required"},
		{"GET", "/attach/ns/p/main?output=1", http.StatusBadRequest, "attach is not supported"},
		{"POST", "/portForward/ns/p?port=x", http.StatusBadRequest, `invalid port "x"`},
		{"POST", "/portForward/ns/p?port=80", http.StatusBadRequest, "port-forward is not supported"},
	} {
		req, _ := http.NewRequest(tc.method, kl.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st metav1.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || st.Kind != "Status" || resp.StatusCode != tc.code || int(st.Code) != tc.code || !strings.Contains(st.Message, tc.body) {
			t.Errorf("%s %s: %d %+v (%v), want a %d Status with %q", tc.method, tc.path, resp.StatusCode, st, err, tc.code, tc.body)
		}
	}

	// An upgraded exec reaches the runtime's server through the kubelet's proxy; tty
	// drops stderr as the kubelet does.
	u, _ := url.Parse(kl.URL + "/exec/ns/p/main?command=echo&command=hi&output=1&error=1&tty=1")
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: u.Host}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Tty: true}); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if out.String() != "ns/p: echo hi" || fs.last != (StreamOptions{Stdout: true, TTY: true}) {
		t.Errorf("exec through the proxy: %q with %+v", out.String(), fs.last)
	}
}
