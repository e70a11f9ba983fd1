package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// component is a leader-elected daemon (controller-manager or scheduler) and the identity
// it writes in its Lease.
type component struct {
	d        *daemon
	identity string
}

// haPlane is wasmplane's control plane as separate processes on one machine: an external
// 3-member etcd (`wasmplane etcd`), two API servers sharing it and one PKI, two
// controller-managers and two schedulers electing leaders on Leases of 4 s.
type haPlane struct {
	root           string
	etcdNames      []string
	etcd           []*daemon
	etcdArgs       [][]string
	etcdClientURLs []string
	dirA, dirB     string
	apiA, apiB     *up
	c              *cluster // API server A, with the admin's clients
	csB            kubernetes.Interface
	cms, scheds    []component
}

// startHAPlane starts the etcd members, then the API servers, then the components.
func startHAPlane(t *testing.T, root string) *haPlane {
	t.Helper()
	h := &haPlane{root: root, etcdNames: []string{"etcd-0", "etcd-1", "etcd-2"}}
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// Members on loopback ports, started together: a member is ready once a quorum runs.
	var initial []string
	peerURLs := map[string]string{}
	for _, n := range h.etcdNames {
		peerURLs[n] = fmt.Sprintf("http://127.0.0.1:%d", testserver.FreePort(t))
		h.etcdClientURLs = append(h.etcdClientURLs, fmt.Sprintf("http://127.0.0.1:%d", testserver.FreePort(t)))
		initial = append(initial, n+"="+peerURLs[n])
	}
	for i, n := range h.etcdNames {
		args := []string{"etcd", "--name", n, "--data-dir", filepath.Join(root, n), "--client-url", h.etcdClientURLs[i],
			"--peer-url", peerURLs[n], "--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "e2e-ha", "--log-level", "warn"}
		h.etcdArgs = append(h.etcdArgs, args)
		h.etcd = append(h.etcd, startDaemon(t, root, n, args...))
	}
	for _, m := range h.etcd {
		m.waitLog(t, etcdReady, 60*time.Second)
	}

	// Two API servers on that etcd. The second reuses the first one's PKI directory: the
	// same CA, serving certificate and ServiceAccount signing key, so that any client,
	// node or token works with either.
	upFlags := []string{"--etcd-servers", strings.Join(h.etcdClientURLs, ","), "--disable-controllers", "--disable-scheduler", "--disable-kubelet"}
	h.dirA, h.dirB = filepath.Join(root, "apiserver-a"), filepath.Join(root, "apiserver-b")
	h.apiA = startUp(t, h.dirA, 0, upFlags...)
	copyDir(t, filepath.Join(h.dirA, "pki"), filepath.Join(h.dirB, "pki"))
	h.apiB = startUp(t, h.dirB, 0, upFlags...)
	h.c = &cluster{t: t, root: root, dir: h.dirA, proc: h.apiA, home: home}
	h.c.connect()
	h.csB = testserver.NewClientset(t, testserver.KubeconfigConfig(t, h.dirB, false))

	schedConfig := h.c.writeFile("scheduler.yaml", `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
`)
	for i, dir := range []string{h.dirA, h.dirB} {
		suffix := string(rune('a' + i))
		// The controllers create and delete pods, ReplicaSets, … everywhere: they run as the
		// admin (system:masters), as kube-controller-manager's shared credential would.
		id := "controller-manager-" + suffix
		h.cms = append(h.cms, component{identity: id, d: startDaemon(t, root, id, "controller-manager",
			"--kubeconfig", filepath.Join(dir, "admin.kubeconfig"), "--identity", id, "--log-level", "info",
			"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")})
		s := startDaemon(t, root, "scheduler-"+suffix, "scheduler", "--kubeconfig", h.kubeconfig(t, dir, "system:kube-scheduler"),
			"--config", schedConfig, "--metrics-bind-address=", "--wasm-cache-dir", filepath.Join(root, "scheduler-cache-"+suffix), "--log-level", "info")
		host, _ := os.Hostname()
		h.scheds = append(h.scheds, component{d: s, identity: fmt.Sprintf("%s_%d", host, s.cmd.Process.Pid)})
	}
	return h
}

// kubeconfig writes a kubeconfig for user (and groups) against the API server of dataDir.
func (h *haPlane) kubeconfig(t *testing.T, dataDir, user string, groups ...string) string {
	t.Helper()
	out := filepath.Join(h.root, strings.ReplaceAll(user, ":", "_")+"@"+filepath.Base(dataDir)+".kubeconfig")
	args := []string{"kubeconfig", "--data-dir", dataDir, "--user", user, "-o", out}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	if _, err := h.c.wp("", args...); err != nil {
		t.Fatal(err)
	}
	return out
}

// leader returns the candidate the Lease names, if it names one of them.
func leader(ctx context.Context, cs kubernetes.Interface, lease string, cands []component) (component, bool) {
	l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return component{}, false
	}
	for _, c := range cands {
		if c.identity == *l.Spec.HolderIdentity {
			return c, true
		}
	}
	return component{}, false
}

// otherOf is the candidate that is not c.
func otherOf(cands []component, c component) component {
	if cands[0].identity == c.identity {
		return cands[1]
	}
	return cands[0]
}
