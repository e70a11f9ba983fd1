// Package robustness checks the guarantees of wasmplane's Kubernetes API under injected
// failures, as etcd's robustness tests do for etcd: concurrent clients create, update,
// patch, delete, get, list and watch a small set of ConfigMaps while one fault is
// injected (kill -9 or SIGSTOP of `wasmplane up`, killing an etcd member, the etcd leader
// or one of two API servers, compacting etcd, WASM validating plugins that loop or exhaust
// their memory on every write), every request recorded with its call and
// return time and its result; then the per-object history is checked for linearizability
// with porcupine, every watch stream for order, gaps and agreement with lists, and an
// informer for ending with the server's exact set. `go test` runs a short profile; the
// flag -robustness.long (or WASMPLANE_ROBUSTNESS_LONG=1) runs every fault longer.
package robustness

import (
	"context"
	"flag"
	"fmt"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"maps"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

var (
	wasmplaneBin string
	long         = flag.Bool("robustness.long", false, "run every fault with longer traffic and more clients (also WASMPLANE_ROBUSTNESS_LONG=1)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testserver.RunWithBinary(m, "github.com/wasmplane/wasmplane/cmd/wasmplane", &wasmplaneBin))
}

// profile sizes a run.
type profile struct {
	name     string
	traffic  time.Duration // how long the clients send requests
	clients  int
	watchers int
	keys     int
	// faults are the faults run on each kind of set-up, one per run.
	single, ha []string
}

func currentProfile() profile {
	if *long || os.Getenv("WASMPLANE_ROBUSTNESS_LONG") != "" {
		return profile{name: "long", traffic: 60 * time.Second, clients: 12, watchers: 3, keys: 10,
			single: []string{"kill-up", "sigstop-up", "wasm-plugins"},
			ha:     []string{"kill-etcd-member", "kill-etcd-leader", "kill-apiserver", "compaction"}}
	}
	return profile{name: "short", traffic: 8 * time.Second, clients: 6, watchers: 2, keys: 6,
		single: []string{"kill-up", "sigstop-up", "wasm-plugins"},
		ha:     []string{"kill-etcd-leader", "kill-apiserver", "compaction"}}
}

// TestRobustness runs each fault of the profile on a fresh namespace of a shared set-up.
func TestRobustness(t *testing.T) {
	p := currentProfile()
	t.Run("single", func(t *testing.T) {
		e := newSingleEnv(t)
		for _, f := range p.single {
			t.Run(f, func(t *testing.T) { runScenario(t, e, p, f) })
		}
	})
	t.Run("ha", func(t *testing.T) {
		e := newHAEnv(t)
		for _, f := range p.ha {
			t.Run(f, func(t *testing.T) { runScenario(t, e, p, f) })
		}
	})
}

// runScenario is one run: traffic, one fault a third of the way in, recovery, checks.
func runScenario(t *testing.T, e *env, p profile, fault string) {
	began := time.Now()
	ns := "robustness-" + fault
	admin := testserver.NewClientset(t, e.ups[0].config(t, 10*time.Second))
	waitfor.Condition(t, 30*time.Second, "creating namespace "+ns, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	var keys []string
	for i := range p.keys {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	h := newHistory()

	// Watchers and an informer run from before the traffic to after the checks' final
	// write, on every API server in turn.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWatch()
	var watchers []*watcher
	for i := range p.watchers {
		w := &watcher{id: i, cs: testserver.NewClientset(t, e.ups[i%len(e.ups)].config(t, 0)), ns: ns, h: h}
		watchers = append(watchers, w)
		wg.Go(func() { w.run(watchCtx) })
	}
	informerClient := testserver.NewClientset(t, e.ups[len(e.ups)-1].config(t, 0))
	factory := informers.NewSharedInformerFactoryWithOptions(informerClient, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(watchCtx.Done())
	defer factory.Shutdown()

	trafficCtx, stopTraffic := context.WithCancel(context.Background())
	traffic := make(chan struct{})
	defer func() { stopTraffic(); <-traffic }() // also when a fault fails the run
	go func() {
		defer close(traffic)
		runTraffic(trafficCtx, h, trafficConfig{namespace: ns, keys: keys, clients: e.clientsets(p.clients, 5*time.Second)})
	}()
	pause(context.Background(), p.traffic/3)
	what := inject(t, e, fault, ns)
	// Traffic goes on after recovery for the rest of the run, at least 2 s; plugins, which
	// take a few seconds to install and load, get half the traffic's time.
	after := 2 * time.Second
	if fault == "wasm-plugins" {
		after = p.traffic / 2
	}
	pause(context.Background(), max(after, p.traffic-time.Since(began)))
	stopTraffic()
	<-traffic

	// A last write every watcher must see, then the final state.
	var sentinelRV int64
	waitfor.Condition(t, 30*time.Second, "writing the final marker", func(ctx context.Context) (bool, error) {
		cm, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "end-marker", "end", 0), metav1.CreateOptions{})
		if err == nil {
			sentinelRV = parseRV(cm.ResourceVersion)
		}
		return err == nil, nil
	})
	final := listRecord{client: p.clients, kind: "final", consistent: true, items: map[string]item{}}
	final.call = h.now()
	l, err := admin.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("final list: %v", err)
	}
	final.ret, final.rv = h.now(), parseRV(l.ResourceVersion)
	for _, cm := range l.Items {
		final.items[cm.Name] = item{RV: parseRV(cm.ResourceVersion), Value: cm.Data["v"]}
	}
	for _, w := range watchers {
		waitfor.Condition(t, 30*time.Second, fmt.Sprintf("watcher %d to see the final marker", w.id), func(context.Context) (bool, error) {
			return w.covered() >= sentinelRV, nil
		})
	}
	want := map[string]string{}
	for n, it := range final.items {
		want[n] = fmt.Sprint(it.RV)
	}
	var informerHas map[string]string
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		informerHas = storeRVs(informer.GetStore())
		return maps.Equal(informerHas, want), nil
	})
	stopWatch()
	wg.Wait()

	r := &report{}
	if err != nil {
		r.fail("the informer ends with %v, the server has %v", informerHas, want)
	}
	r.violations = append(r.violations, h.violations...)
	checkLinearizable(r, h, keys, final, visualizationDir(fault))
	checkWatches(r, h, watchers, final)
	plugins := ""
	if fault == "wasm-plugins" {
		plugins = checkPluginFaults(context.Background(), r, admin, ns)
	}
	refused := ""
	for k, n := range h.refused {
		refused += fmt.Sprintf(" %s=%d", k, n)
	}
	t.Logf("robustness %s %s: fault %s survived; %d operations checked (%d unknown outcome), linearizable=%s; %d lists (%d compared with watches); "+
		"%d watch events in %d segments, %d reconnections; acknowledged writes %d: %d seen in watches, %d in no watch's range; "+
		"connection refused %d; refused%s%s; %.1fs",
		p.name, fault, what, r.ops, r.unknown, r.linearizable, r.lists, r.listChecks, r.events, r.segments, r.reconnects,
		r.acked, r.ackedSeen, r.ackedUncovered, h.failed, refused, plugins, time.Since(began).Seconds())
	for _, v := range r.violations {
		t.Errorf("violation: %s", v)
	}
}

// storeRVs is an informer store's objects by name, with their resourceVersions.
func storeRVs(s cache.Store) map[string]string {
	out := map[string]string{}
	for _, o := range s.List() {
		cm := o.(*corev1.ConfigMap)
		out[cm.Name] = cm.ResourceVersion
	}
	return out
}

// inject runs one fault and the recovery from it, and says what it did.
func inject(t *testing.T, e *env, fault, ns string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch fault {
	case "kill-up":
		e.ups[0].kill()
		e.ups[0].start(t)
		return "kill -9 of up, restarted on its data dir"
	case "sigstop-up":
		e.ups[0].signal(t, syscall.SIGSTOP)
		pause(ctx, 3*time.Second)
		e.ups[0].signal(t, syscall.SIGCONT)
		return "SIGSTOP of up for 3s, then SIGCONT"
	case "kill-etcd-member", "kill-etcd-leader":
		leader, err := e.etcdLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		victim := leader
		if fault == "kill-etcd-member" {
			victim = (leader + 1) % len(e.etcd)
		}
		e.etcd[victim].kill()
		if fault == "kill-etcd-leader" {
			// Wait for the two others to elect a new leader before the member comes back.
			waitfor.Condition(t, 30*time.Second, "a new etcd leader", func(ctx context.Context) (bool, error) {
				l, err := e.etcdLeader(ctx)
				return err == nil && l != victim, nil
			})
		} else {
			pause(ctx, 2*time.Second)
		}
		e.etcd[victim].start(t)
		return fmt.Sprintf("kill -9 of etcd member %d (leader %d), restarted", victim, leader)
	case "kill-apiserver":
		e.ups[1].kill()
		pause(ctx, 2*time.Second)
		e.ups[1].start(t)
		return "kill -9 of the second API server, restarted"
	case "wasm-plugins":
		// Installed for the rest of the run: no recovery but the plugins' own deadlines
		// and memory limit, call after call.
		return installFaultyPlugins(ctx, t, e.ups[0], ns)
	case "compaction":
		rev, err := e.compact(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("etcd compacted to its current revision %d mid-watch", rev)
	}
	t.Fatalf("unknown fault %q", fault)
	return ""
}
