package e2e

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
)

// runawayTimeout is the call deadline of the faulty plugins (the default of plugin apply).
const runawayTimeout = time.Second

// TestRunawayPluginsDoNotStarveTheServer reproduces the looping-plugin freeze: `wasmplane
// up` runs with GOMAXPROCS 1 and 2, a validating WasmPlugin that loops forever (then one
// that grows its memory until the limit, then one that traps) sees 4 × GOMAXPROCS
// concurrent creates, and every create must fail within the plugin's deadline + 50 ms
// while /readyz, polled throughout, answers within 100 ms. Then SIGQUIT with looping calls
// in flight must dump the goroutines and leave the server serving, and SIGTERM must stop
// it cleanly (exit 0).
func TestRunawayPluginsDoNotStarveTheServer(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run("GOMAXPROCS="+strconv.Itoa(procs), func(t *testing.T) {
			t.Setenv("GOMAXPROCS", strconv.Itoa(procs)) // inherited by `wasmplane up`
			c := newCluster(t)
			admin := c.adminKubeconfig()
			n := 4 * procs
			for _, plugin := range []string{"loop", "membomb", "trap"} {
				ns := "runaway-" + plugin
				c.createNamespaces(ns)
				module := filepath.Join(c.root, plugin+".wasm")
				if err := os.WriteFile(module, wasmtest.WAT(t, plugin), 0o600); err != nil {
					t.Fatal(err)
				}
				c.mustPluginApply(admin, plugin, ns, "--module", module, "--hooks", "validate", "--rules", "configmaps:CREATE")
				probe := startReadyzProbe(t, c)
				for round := range 2 {
					c.runawayRound(t, ns, fmt.Sprintf("%s-%d", plugin, round), n)
				}
				probe.stopAndCheck(t, plugin)
			}

			// Signals with looping calls in flight.
			inflight := c.startLooping(t, "runaway-loop", n)
			if err := c.proc.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
				t.Fatal(err)
			}
			waitfor.Condition(t, 10*time.Second, "the goroutine dump on SIGQUIT", func(context.Context) (bool, error) {
				b, err := os.ReadFile(c.proc.log)
				return err == nil && strings.Contains(string(b), "=== goroutine dump on SIGQUIT"), err
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.admin.Discovery().ServerVersion(); err != nil {
				t.Fatalf("GET /version after SIGQUIT: %v", err)
			}
			if _, err := c.admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
				t.Fatalf("the server stopped serving after SIGQUIT: %v", err)
			}
			inflight.Wait()
			inflight = c.startLooping(t, "runaway-loop", n)
			if err := c.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.proc.done:
			case <-time.After(60 * time.Second):
				t.Fatal("wasmplane up still runs 60 s after SIGTERM")
			}
			inflight.Wait()
			if st := c.proc.cmd.ProcessState; !st.Success() {
				t.Fatalf("wasmplane up exited with %v after SIGTERM; log:\n%s", st, tail(c.proc.log, 40))
			}
		})
	}
}

// runawayRound sends n concurrent creates that the namespace's faulty plugin must fail,
// each within the plugin's deadline + 50 ms. What the server spends on a create besides
// the plugin (the slowest of n concurrent creates in a namespace without plugins, sent
// just before) is added to the bound: on a shared 2-core machine it alone reaches tens of
// milliseconds.
func (c *cluster) runawayRound(t *testing.T, ns, prefix string, n int) {
	t.Helper()
	base, baseErrs := c.concurrentCreates("default", prefix+"-base", n)
	for _, err := range baseErrs {
		if err != nil {
			t.Fatalf("create without plugins: %v", err)
		}
	}
	overhead := slices.Max(base)
	took, errs := c.concurrentCreates(ns, prefix, n)
	for i := range n {
		if errs[i] == nil || !apierrors.IsInternalError(errs[i]) && !strings.Contains(errs[i].Error(), "wasm") {
			t.Errorf("%s create %d: %v, want the plugin's failure", prefix, i, errs[i])
		}
		if took[i] > runawayTimeout+50*time.Millisecond+overhead {
			t.Errorf("%s create %d failed after %v; the plugin's deadline is %v, a create without plugins took %v", prefix, i, took[i], runawayTimeout, overhead)
		}
	}
	t.Logf("%s: %d concurrent creates failed after %v … %v (without plugins: ≤ %v) (%v)", prefix, n, slices.Min(took), slices.Max(took), overhead, errs[0])
}

// concurrentCreates creates n ConfigMaps in ns at once and returns how long each took.
func (c *cluster) concurrentCreates(ns, prefix string, n int) ([]time.Duration, []error) {
	var wg sync.WaitGroup
	took := make([]time.Duration, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, errs[i] = c.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return took, errs
}

// startLooping starts n creates into the looping plugin's namespace; Wait returns when
// they have ended (whatever their outcome: the server may be stopping).
func (c *cluster) startLooping(t *testing.T, ns string, n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "inflight-"}}
			_, _ = c.admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		}()
	}
	// Let the calls reach the guest: the plugin's deadline is a second.
	time.Sleep(200 * time.Millisecond)
	return &wg
}

// readyzProbe polls /readyz every 20 ms, each poll with a 100 ms deadline.
type readyzProbe struct {
	stop   chan struct{}
	done   chan struct{}
	polls  int
	worst  time.Duration
	failed []string
}

func startReadyzProbe(t *testing.T, c *cluster) *readyzProbe {
	p := &readyzProbe{stop: make(chan struct{}), done: make(chan struct{})}
	rc := c.admin.CoreV1().RESTClient()
	go func() {
		defer close(p.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for first := true; ; first = false {
			if !first {
				select {
				case <-p.stop:
					return
				case <-tick.C:
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			start := time.Now()
			_, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
			took := time.Since(start)
			cancel()
			p.polls++
			p.worst = max(p.worst, took)
			if err != nil {
				p.failed = append(p.failed, fmt.Sprintf("after %v: %v", took, err))
			}
		}
	}()
	return p
}

func (p *readyzProbe) stopAndCheck(t *testing.T, what string) {
	t.Helper()
	close(p.stop)
	<-p.done
	// One poll in fifty may miss: the machine the tests run on is shared, and the OS
	// alone deschedules the server for that long now and then. A starved server misses
	// them all.
	if len(p.failed) > p.polls/50 {
		t.Errorf("%s: %d of %d /readyz polls failed their 100 ms deadline: %v", what, len(p.failed), p.polls, p.failed)
	}
	t.Logf("%s: %d /readyz polls, slowest %v", what, p.polls, p.worst)
}
