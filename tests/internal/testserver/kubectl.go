package testserver

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Kubectl runs the kubectl binary bin against s in namespace ns with stdin, and returns
// stdout, stderr and the error; each call has a fresh HOME and at most a minute.
func (s *Server) Kubectl(t testing.TB, bin, ns, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", s.KubeconfigPath(), "-n", ns}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// MustKubectl is Kubectl failing the test on error.
func (s *Server) MustKubectl(t testing.TB, bin, ns, stdin string, args ...string) string {
	t.Helper()
	out, stderr, err := s.Kubectl(t, bin, ns, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}
