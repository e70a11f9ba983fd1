package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// execPod starts a pod whose toolbox container sleeps, and waits until it runs.
func (e *kubeletEnv) execPod(name string) {
	e.t.Helper()
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: grace(0),
		Containers:                    []corev1.Container{container("main", "toolbox", "sleep", "1h")}}})
	e.waitPod(name, "running", 60*time.Second, running)
}

// TestExec runs the real kubectl exec (WebSocket v5, as kubectl 1.37 first tries) and
// attach through the API server's pods/exec, the kubelet and the WASI runtime's streaming
// server, then client-go's executors of both protocols.
func TestExec(t *testing.T) {
	e := kubeletSetup(t)
	e.execPod("box")
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done"}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{container("main", "toolbox", "true")}}})
	e.create(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unpulled"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("main", "no-such-image")}}})
	e.waitPod("done", "Succeeded", 60*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })

	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			return -1
		}
		return 0
	}
	for _, tc := range []struct {
		name       string
		args       []string
		stdin      string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{name: "output", args: []string{"exec", "box", "--", "toolbox", "echo", "hello", "exec"}, wantOut: "hello exec\n"},
		{name: "argv0 applet and env", args: []string{"exec", "box", "-c", "main", "--", "sh", "-c", "echo one; echo two"}, wantOut: "one\ntwo\n"},
		{name: "exit code", args: []string{"exec", "box", "--", "toolbox", "exit", "3"}, wantStatus: 3},
		{name: "stdin", args: []string{"exec", "-i", "box", "--", "toolbox", "cat"}, stdin: "piped\nlines\n", wantOut: "piped\nlines\n"},
		{name: "stderr", args: []string{"exec", "box", "--", "toolbox", "cat", "/no/such/file"}, wantStatus: 1, wantErr: "cat: /no/such/file: No such file or directory\ncommand terminated with exit code 1"},
		{name: "missing container", args: []string{"exec", "box", "-c", "nope", "--", "toolbox", "true"}, wantStatus: 1,
			wantErr: "container nope is not valid for pod box"},
		{name: "missing pod", args: []string{"exec", "ghost", "--", "toolbox", "true"}, wantStatus: 1,
			wantErr: `Error from server (NotFound): pods "ghost" not found`},
		{name: "completed pod", args: []string{"exec", "done", "--", "toolbox", "true"}, wantStatus: 1,
			wantErr: "cannot exec into a container in a completed pod; current phase is Succeeded"},
		{name: "container not started", args: []string{"exec", "unpulled", "--", "toolbox", "true"}, wantStatus: 1,
			wantErr: `container not found ("main")`},
		{name: "attach to a completed pod", args: []string{"attach", "done"}, wantStatus: 1,
			wantErr: "cannot attach a container in a completed pod; current phase is Succeeded"},
		{name: "cp", args: []string{"cp", "box:/etc/hosts", t.TempDir() + "/hosts"}, wantStatus: 127, wantOut: "cf: not found\n",
			wantErr: "command terminated with exit code 127"},
		{name: "port-forward", args: []string{"port-forward", "pod/box", ":80"}, stdin: "", wantStatus: 1, wantErr: "port-forward is not supported"},
	} {
		t.Run("kubectl "+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := e.kubectl(ctx, tc.args...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errOut, strings.NewReader(tc.stdin)
			err := cmd.Run()
			if got := exitCode(err); got != tc.wantStatus {
				t.Errorf("exit status %d (%v), want %d; stdout %q stderr %q", got, err, tc.wantStatus, out.String(), errOut.String())
			}
			if tc.wantOut != "" && out.String() != tc.wantOut {
				t.Errorf("stdout = %q, want %q (stderr %q)", out.String(), tc.wantOut, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tc.wantErr)
			}
		})
	}
	remoteCommandProtocols(t, e)
	execAuthorization(t, e)
}

// execAuthorization checks that, as in Kubernetes, a WebSocket exec (a GET) needs
// "create" on pods/exec besides the "get" the request is filtered as.
func execAuthorization(t *testing.T, e *kubeletEnv) {
	ctx := context.Background()
	rbac := e.cs.RbacV1()
	if _, err := rbac.Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "exec-get"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/exec"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "exec-get"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "exec-get"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := e.s.Config(false)
	cfg.Impersonate.UserName = "alice"
	u := e.cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("box").SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: []string{"toolbox", "true"}, Stdout: true}, scheme.ParameterCodec).URL()
	want := `User "alice" cannot create resource "pods/exec" in API group "" in the namespace "default"`
	stream := func() error {
		ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
	}
	// The Role reaches the authorizer's cache a moment after it is created: until then
	// the GET itself is refused ("cannot get").
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = stream()
		return last != nil && strings.Contains(last.Error(), want), nil
	}); err != nil {
		t.Errorf("WebSocket exec with only get: %v, want %q", last, want)
	}
	role, err := rbac.Roles("default").Get(ctx, "exec-get", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Rules[0].Verbs = append(role.Rules[0].Verbs, "create")
	if _, err := rbac.Roles("default").Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.poll(30*time.Second, "alice may exec", func(context.Context) (bool, error) { return stream() == nil, nil })
}

// remoteCommandProtocols execs with client-go's WebSocket and SPDY executors, so both
// protocols are served end to end, with stdin, stdout, stderr and the exit code, and the
// API server's own errors reach the client.
func remoteCommandProtocols(t *testing.T, e *kubeletEnv) {
	cfg := e.s.Config(false)
	for _, proto := range []string{"websocket", "spdy"} {
		t.Run(proto, func(t *testing.T) {
			for _, tc := range []struct {
				container        string
				cmd              []string
				stdin, out, serr string
				code             int
				err              string
				tty              bool
			}{
				{cmd: []string{"toolbox", "cat"}, stdin: "round trip\n", out: "round trip\n"},
				{cmd: []string{"toolbox", "sh", "-c", "cat /missing || exit 7"}, serr: "missing", code: 7},
				{container: "nope", cmd: []string{"toolbox", "true"}, err: "container nope is not valid for pod box"},
				{cmd: []string{"toolbox", "true"}, tty: true, err: "WASI containers have no terminal"},
			} {
				if tc.container == "" {
					tc.container = "main"
				}
				u := e.cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("box").SubResource("exec").
					VersionedParams(&corev1.PodExecOptions{Container: tc.container, Command: tc.cmd, Stdin: true, Stdout: true, Stderr: !tc.tty, TTY: tc.tty}, scheme.ParameterCodec).URL()
				var ex remotecommand.Executor
				var err error
				if proto == "websocket" {
					ex, err = remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
				} else {
					ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", u)
				}
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				var out, serr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdin: strings.NewReader(tc.stdin), Stdout: &out, Stderr: &serr, Tty: tc.tty}
				if tc.tty {
					opts.Stderr = nil
				}
				err = ex.StreamWithContext(ctx, opts)
				cancel()
				code := 0
				var ce utilexec.CodeExitError
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Errorf("%v in %s: error %v, want %q", tc.cmd, tc.container, err, tc.err)
					}
					continue
				}
				if errors.As(err, &ce) {
					code = ce.Code
				} else if err != nil {
					t.Fatalf("%v: %v", tc.cmd, err)
				}
				if code != tc.code || out.String() != tc.out || !strings.Contains(serr.String(), tc.serr) {
					t.Errorf("%v: code %d stdout %q stderr %q; want %d %q %q", tc.cmd, code, out.String(), serr.String(), tc.code, tc.out, tc.serr)
				}
			}
		})
	}
}
