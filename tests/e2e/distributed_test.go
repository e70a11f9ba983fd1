package e2e

import (
	"bytes"
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// daemon is a long-running `wasmplane` subprocess (etcd member, controller-manager,
// scheduler, agent) logging stdout and stderr to one file.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startDaemon runs `wasmplane args…`, logging to dir/name.log; the process is killed when
// the test ends and, if the test failed, the log's tail is shown.
func startDaemon(t *testing.T, dir, name string, args ...string) *daemon {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating %s: %v", logPath, err)
	}
	cmd := exec.Command(wasmplaneBin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting wasmplane %s: %v", strings.Join(args, " "), err)
	}
	d := &daemon{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", logPath, tail(logPath, 25))
		}
	})
	return d
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (d *daemon) kill9(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 %s: %v", d.name, err)
	}
	<-d.done
}

// exited tells whether the process has ended.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// logCount counts the lines of the daemon's log matching re.
func (d *daemon) logCount(re *regexp.Regexp) int {
	b, _ := os.ReadFile(d.log)
	return len(re.FindAll(b, -1))
}

// waitLog waits until the daemon logged a line matching re; an exit fails the test.
func (d *daemon) waitLog(t *testing.T, re *regexp.Regexp, timeout time.Duration) {
	t.Helper()
	waitfor.Condition(t, timeout, d.name+" to log "+re.String(), func(context.Context) (bool, error) {
		select {
		case <-d.done:
			return false, fmt.Errorf("%s exited (%v): %s", d.name, d.cmd.ProcessState, tail(d.log, 10))
		default:
		}
		return d.logCount(re) > 0, nil
	})
}

var (
	etcdReady        = regexp.MustCompile(`etcd member \S+ is ready at`)
	schedulerLeading = regexp.MustCompile(`became leader, starting scheduler`)
	cmLeading        = regexp.MustCompile(`became leader, starting controllers`)
)

// TestDistributed runs wasmplane as separate processes on one machine: an external
// 3-member etcd (`wasmplane etcd`), two API servers sharing it and one PKI, two
// controller-managers and two schedulers (one leader each) and two `wasmplane agent`
// nodes. A Deployment spreads over both nodes; the leader scheduler and controller-manager
// are killed with SIGKILL (the others take their Leases and carry out a scale-up), then
// one agent (its node goes NotReady, its pods are evicted and replaced on the other node).
func TestDistributed(t *testing.T) {
	began := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), what) }
	root := t.TempDir()
	sleeper := artifacts.workload(t, "sleeper")
	phase("workloads built")
	h := startHAPlane(t, root)
	for _, f := range []string{"ca.crt", "ca.key", "sa.key", "apiserver.crt"} {
		if !sameFile(t, filepath.Join(h.dirA, "pki", f), filepath.Join(h.dirB, "pki", f)) {
			t.Fatalf("API server B replaced the shared pki/%s", f)
		}
	}
	phase("etcd: 3 members ready; API servers up at " + h.apiA.url + " and " + h.apiB.url)
	c, csA, csB, cms, scheds := h.c, h.c.admin, h.csB, h.cms, h.scheds
	dirA, dirB, apiB := h.dirA, h.dirB, h.apiB
	agents := map[string]*daemon{}
	for i, dir := range []string{dirA, dirB} {
		node := "node-" + string(rune('a'+i))
		agentRoot := filepath.Join(root, "agent-"+node)
		if _, err := c.wp("", "image", "import", sleeper, "--name", "sleeper:1", "--root", filepath.Join(agentRoot, "runtime")); err != nil {
			t.Fatal(err)
		}
		agents[node] = startDaemon(t, root, "agent-"+node, "agent", "--kubeconfig", h.kubeconfig(t, dir, "system:node:"+node, "system:nodes"),
			"--node-name", node, "--root-dir", agentRoot, "--kubelet-port", "-1", "--client-ca-file", filepath.Join(dirA, "pki", "ca.crt"), "--log-level", "info")
	}
	waitfor.Condition(t, 60*time.Second, "both nodes Ready", func(ctx context.Context) (bool, error) {
		return nodeReady(ctx, csA, "node-a") && nodeReady(ctx, csA, "node-b"), nil
	})
	phase("2 controller-managers, 2 schedulers, 2 agents started; nodes Ready")

	// One leader each: the Lease names one of the candidates, and only that one started
	// working.
	var cmLeader, schedLeader component
	waitfor.Condition(t, 60*time.Second, "a controller-manager and a scheduler leader", func(ctx context.Context) (bool, error) {
		var ok1, ok2 bool
		cmLeader, ok1 = leader(ctx, csB, "wasmplane-controller-manager", cms)
		schedLeader, ok2 = leader(ctx, csB, "kube-scheduler", scheds)
		return ok1 && ok2, nil
	})
	waitfor.Condition(t, 30*time.Second, "the leaders to start working", func(context.Context) (bool, error) {
		return cmLeader.d.logCount(cmLeading) == 1 && schedLeader.d.logCount(schedulerLeading) == 1, nil
	})
	for _, cands := range [][]component{cms, scheds} {
		leading := 0
		for _, c := range cands {
			leading += c.d.logCount(cmLeading) + c.d.logCount(schedulerLeading)
		}
		if leading != 1 {
			t.Fatalf("%d of %s and %s lead, want exactly 1", leading, cands[0].d.name, cands[1].d.name)
		}
	}
	phase(fmt.Sprintf("leaders: %s, %s", cmLeader.d.name, schedLeader.d.name))

	// The shared ServiceAccount signing key: a token one server issues, the other accepts.
	var token string
	waitfor.Condition(t, 30*time.Second, "a token for the default ServiceAccount from API server A", func(context.Context) (bool, error) {
		out, err := c.kubectl(c.adminKubeconfig(), "", "create", "token", "default", "-n", "default")
		token = strings.TrimSpace(out)
		return err == nil && token != "", nil
	})
	caPEM, err := os.ReadFile(filepath.Join(dirA, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	saB := testserver.NewClientset(t, &rest.Config{Host: apiB.url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}})
	ssr, err := saB.AuthenticationV1().SelfSubjectReviews().Create(testCtx(t, 10*time.Second), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("API server B rejects A's ServiceAccount token: %v", err)
	}
	if got := ssr.Status.UserInfo.Username; got != "system:serviceaccount:default:default" {
		t.Fatalf("API server B sees A's token as %q", got)
	}

	// A Deployment, created through B, spreads over both nodes.
	const ns = "default"
	ctx := testCtx(t, 4*time.Minute)
	if _, err := csB.AppsV1().Deployments(ns).Create(ctx, spreadDeployment(6), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Deployment: %v", err)
	}
	perNode := waitDeploymentAvailable(t, csA, ns, "spread", 6, 90*time.Second, nil)
	if len(perNode) != 2 {
		t.Fatalf("6 pods on nodes %v, want both nodes", perNode)
	}
	phase(fmt.Sprintf("Deployment available, pods per node %v", perNode))

	// kill -9 the leader scheduler and the leader controller-manager: the others take their
	// Leases (4 s here, instead of the default 15 s) and between them create and schedule the
	// pods of a scale-up.
	otherSched, otherCM := otherOf(scheds, schedLeader), otherOf(cms, cmLeader)
	schedLeader.d.kill9(t)
	cmLeader.d.kill9(t)
	killed := time.Now()
	var schedTook, cmTook time.Duration
	waitfor.Condition(t, 30*time.Second, "the other scheduler and controller-manager to take the Leases", func(ctx context.Context) (bool, error) {
		if l, ok := leader(ctx, csA, "kube-scheduler", scheds); ok && l.identity == otherSched.identity && schedTook == 0 {
			schedTook = time.Since(killed)
		}
		if l, ok := leader(ctx, csA, "wasmplane-controller-manager", cms); ok && l.identity == otherCM.identity && cmTook == 0 {
			cmTook = time.Since(killed)
		}
		return schedTook > 0 && cmTook > 0, nil
	})
	phase(fmt.Sprintf("failover after kill -9 of the leaders: %s leads after %.1fs, %s after %.1fs",
		otherSched.d.name, schedTook.Seconds(), otherCM.d.name, cmTook.Seconds()))
	if _, err := c.kubectl(c.adminKubeconfig(), "", "scale", "deployment/spread", "--replicas=8", "-n", ns); err != nil {
		t.Fatal(err)
	}
	perNode = waitDeploymentAvailable(t, csB, ns, "spread", 8, 60*time.Second, nil)
	if otherSched.d.logCount(schedulerLeading) != 1 || otherCM.d.logCount(cmLeading) != 1 {
		t.Fatalf("%s or %s did not start working", otherSched.d.name, otherCM.d.name)
	}
	phase(fmt.Sprintf("scaled to 8 by the new leader, pods per node %v", perNode))

	// kill -9 an agent: its node goes NotReady, its pods are evicted (they tolerate the
	// node's taints 5 s) and replaced on the other node.
	victim, survivor := "node-a", "node-b"
	onVictim := podsOn(t, csA, ns, victim)
	agents[victim].kill9(t)
	killed = time.Now()
	waitfor.Condition(t, 70*time.Second, victim+" to go NotReady", func(ctx context.Context) (bool, error) {
		return !nodeReady(ctx, csA, victim), nil
	})
	phase(fmt.Sprintf("%s NotReady %.1fs after its agent was killed", victim, time.Since(killed).Seconds()))
	waitfor.Condition(t, 60*time.Second, fmt.Sprintf("the %d pods of %s to be evicted", len(onVictim), victim), func(ctx context.Context) (bool, error) {
		for _, name := range onVictim {
			p, err := csA.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
	phase(fmt.Sprintf("%d pods evicted %.1fs after the kill", len(onVictim), time.Since(killed).Seconds()))
	perNode = waitDeploymentAvailable(t, csB, ns, "spread", 8, 60*time.Second, []string{survivor})
	phase(fmt.Sprintf("Deployment available again %.1fs after the kill, pods per node %v", time.Since(killed).Seconds(), perNode))
}

// spreadDeployment is n long-running sleeper pods that prefer to spread over nodes and
// tolerate an unreachable or not-ready node only 5 s (instead of the default 300 s).
func spreadDeployment(n int32) *appsv1.Deployment {
	labels := map[string]string{"app": "spread"}
	tolerate := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "spread"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Tolerations:                   []corev1.Toleration{tolerate(corev1.TaintNodeUnreachable), tolerate(corev1.TaintNodeNotReady)},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
						WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Containers: []corev1.Container{{Name: "sleeper", Image: "sleeper:1", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
				},
			},
		},
	}
}

// waitDeploymentAvailable waits until the Deployment has n available, up-to-date replicas
// and exactly n live pods, all Running and Ready — on the given nodes if any — and
// returns how many run on each node.
func waitDeploymentAvailable(t *testing.T, cs kubernetes.Interface, ns, name string, n int32, timeout time.Duration, onNodes []string) map[string]int {
	t.Helper()
	var perNode map[string]int
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = fmt.Sprintf("available %d, updated %d, replicas %d", d.Status.AvailableReplicas, d.Status.UpdatedReplicas, d.Status.Replicas)
		defer func() { last += fmt.Sprintf("; live pods per node %v", perNode) }()
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas != n || d.Status.UpdatedReplicas != n {
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, nil
		}
		perNode = map[string]int{}
		live := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if !podRunning(p) || (len(onNodes) > 0 && !slices.Contains(onNodes, p.Spec.NodeName)) {
				return false, nil
			}
			perNode[p.Spec.NodeName]++
		}
		return live == int(n), nil
	})
	if err != nil {
		t.Fatalf("waiting for Deployment %s to have %d available replicas (last seen: %s): %v", name, n, last, err)
	}
	return perNode
}

// podsOn lists the names of the live pods bound to node.
func podsOn(t *testing.T, cs kubernetes.Interface, ns, node string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(testCtx(t, 10*time.Second), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatalf("listing the pods of %s: %v", node, err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// nodeReady tells whether the node exists with condition Ready=True.
func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// copyDir copies the regular files of src into dst (created 0700), keeping their modes.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying %s to %s: %v", src, dst, err)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}
