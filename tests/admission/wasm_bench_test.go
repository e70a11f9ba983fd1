package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/core/trace"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/tests/internal/requireteam"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/webhookserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// BenchmarkPodCreateWasmValidate measures pod create latency through an API-only server
// with 0, 1 and 5 validating WASM plugins matching the pods: the require-labels example
// built from Rust, C, AssemblyScript and standard Go, each plugin configured to require
// the label the pods carry, so every create runs every plugin and is admitted. Reports
// p50/p99 in microseconds per case and, per language, what one plugin alone adds at p50
// and what each of five adds (five against none, divided by five); the goal is at most
// 100 µs per plugin at p50. The same rule as a ValidatingAdmissionPolicy and as a
// validating webhook take the same turns, and what each adds at p50 is reported beside:
// the fastest plugin should add no more than the policy, every plugin at most a tenth of
// the webhook. BenchmarkLonePolicyCreate measures each policy alone otherwise: in turns
// with the no-policy case only.
func BenchmarkPodCreateWasmValidate(b *testing.B) {
	w := startPolicyBench(b)
	modules, setups := w.modules, w.setups
	// The cases take turns, one create each, rather than running one after another: the
	// server's state (pods stored, caches, heap) drifts over a run by more than one
	// plugin costs, and taking turns makes every case see the same drift.
	b.Run("interleaved", func(b *testing.B) {
		// Warm the plugins' instance pools and the client's connection.
		for range 20 {
			for _, st := range setups {
				w.create(b, st.ns)
			}
		}
		lat := make([][]time.Duration, len(setups))
		names := make([][]string, len(setups))
		// Each turn takes the cases in another order: a case that always came after the
		// same one would find that one's code in the caches, or its own evicted (a lone
		// Rego policy after five of the same module ran with its code warm).
		order := make([]int, len(setups))
		for i := range order {
			order[i] = i
		}
		rnd := rand.New(rand.NewPCG(1, 2))
		b.ResetTimer()
		for range b.N {
			rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, i := range order {
				name, d := w.create(b, setups[i].ns)
				lat[i] = append(lat[i], d)
				names[i] = append(names[i], name)
			}
		}
		b.StopTimer()
		p50 := make(map[string]float64, len(setups))
		for i, st := range setups {
			p50[st.name] = reportLatency(b, st.name, lat[i])
		}
		// What a plugin adds at p50: one alone, and each of five (five against none, per
		// plugin); what the policy and the webhook add.
		for _, m := range modules {
			b.ReportMetric(p50[m.lang+"/plugins=1"]-p50["plugins=0"], m.lang+"-one-plugin-µs")
			b.ReportMetric((p50[m.lang+"/plugins=5"]-p50["plugins=0"])/5, m.lang+"-per-plugin-µs")
		}
		for _, c := range []string{"vap", "webhook"} {
			b.ReportMetric(p50[c]-p50["plugins=0"], c+"-adds-µs")
		}
		// The server's own time for each policy, from the pods' traces (the last creates
		// of each case: the trace ring keeps the last 4,096 objects). Unlike the
		// differences of p50s above it does not move with the rest of a create, so it
		// tells one language from another on a loaded machine.
		sampled := min(b.N, traceRing/len(setups)-1)
		for i, st := range setups[1:] {
			w.reportServerTime(b, st, names[i+1][len(names[i+1])-sampled:])
		}
	})
}

// BenchmarkLonePolicyCreate measures what each policy adds to a pod create when it is the
// only policy the server runs: the no-policy case and one other take turns (none, X, none,
// X, …) in blocks of lonePairs, every case once per round, so that between two calls of a
// policy the server runs one create without any, as a server with that policy alone does.
// In BenchmarkPodCreateWasmValidate's turns a lone plugin runs once in fourteen creates,
// after every other language's plugins have evicted its code and memory from the CPU's
// caches. b.N pairs per case; what a case adds is its p50 less the p50 of the no-policy
// creates of its own blocks, and its own server-side p50 is read from the traces of its
// last block, as the other benchmark reads it. WASMPLANE_BENCH_CASES, a regular
// expression, keeps the cases whose names it matches (with WASMPLANE_BENCH_MODULES, say
// '^(c|c-before)/|^webhook$').
func BenchmarkLonePolicyCreate(b *testing.B) {
	w := startPolicyBench(b)
	only, err := regexp.Compile(os.Getenv("WASMPLANE_BENCH_CASES"))
	if err != nil {
		b.Fatalf("WASMPLANE_BENCH_CASES: %v", err)
	}
	var lone []policySetup
	for _, st := range w.setups[1:] {
		if !strings.HasSuffix(st.name, "/plugins=5") && only.MatchString(st.name) {
			lone = append(lone, st)
		}
	}
	if len(lone) == 0 {
		b.Fatalf("no case matches WASMPLANE_BENCH_CASES %q", only)
	}
	// A round of every case must fit in the trace ring for the server-side times to be
	// read.
	pairs := min(lonePairs, traceRing/(2*len(lone)))
	base := w.setups[0].ns
	b.Run("pairs", func(b *testing.B) {
		for _, st := range lone {
			for range 20 {
				w.create(b, base)
				w.create(b, st.ns)
			}
		}
		lat := make([][]time.Duration, len(lone))
		baseLat := make([][]time.Duration, len(lone))
		var last [][]string // the names of each case's creates in the last round
		b.ResetTimer()
		for round := 0; round*pairs < b.N; round++ {
			n := min(pairs, b.N-round*pairs)
			last = make([][]string, len(lone))
			// Each round starts with another case, so that no case always follows the same.
			for k := range lone {
				i := (round + k) % len(lone)
				for range n {
					_, d := w.create(b, base)
					baseLat[i] = append(baseLat[i], d)
					name, d := w.create(b, lone[i].ns)
					lat[i] = append(lat[i], d)
					last[i] = append(last[i], name)
				}
			}
		}
		b.StopTimer()
		for i, st := range lone {
			none := reportLatency(b, st.name+"-none", baseLat[i])
			b.ReportMetric(reportLatency(b, st.name, lat[i])-none, st.name+"-adds-µs")
			w.reportServerTime(b, st, last[i])
		}
	})
}

// lonePairs is how many pairs of creates a case of BenchmarkLonePolicyCreate takes in a
// row, unless a round of all its cases (2 × cases × pairs objects) would not fit in the
// trace ring.
const lonePairs = 200

// benchModules reads WASMPLANE_BENCH_MODULES: space-separated name=file.wasm, each a
// require-labels build (configured {"labels":["team"]}) that the policy benchmarks add to
// their cases as name/plugins=1 and name/plugins=5. Two builds of one plugin — before
// and after a change — then take turns in one server, and the machine's moments (a
// neighbour's load, the host's caches) fall on both alike, which separate runs cannot
// ensure.
func benchModules(spec string) ([]policyModule, error) {
	var out []policyModule
	for _, kv := range strings.Fields(spec) {
		name, file, ok := strings.Cut(kv, "=")
		if !ok || name == "" || file == "" {
			return nil, fmt.Errorf("WASMPLANE_BENCH_MODULES: %q is not name=file.wasm", kv)
		}
		mod, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("WASMPLANE_BENCH_MODULES: %w", err)
		}
		out = append(out, policyModule{lang: name, wasm: mod, config: `{"labels":["team"]}`})
	}
	return out, nil
}

// create creates a pod carrying the label team in ns and returns its name and how long the
// create took.
func (w *policyBench) create(b *testing.B, ns string) (string, time.Duration) {
	p := simplePod(fmt.Sprintf("p-%d", w.created))
	p.Labels = map[string]string{"team": "bench"}
	w.created++
	start := time.Now()
	if _, err := w.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return p.Name, time.Since(start)
}

// reportLatency reports the p50 and p99 of lat, as name-p50-µs and name-p99-µs, and returns
// the p50 in microseconds.
func reportLatency(b *testing.B, name string, lat []time.Duration) float64 {
	slices.Sort(lat)
	p50 := float64(lat[len(lat)/2].Microseconds())
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), name+"-p99-µs")
	return p50
}

// reportServerTime reports the p50, the mean and the p90 of a case's own admission step
// over the pods named, from their traces: a plugin's call as the admission chain times
// it, the policy's or the webhook's admission step. Added to creates whose own times
// spread far wider (the write to etcd), a step shifts their p50 by about its mean, not
// its p50: a step that is now and then much slower adds more than its p50 says.
func (w *policyBench) reportServerTime(b *testing.B, st policySetup, names []string) {
	step := func(name string) bool { return strings.HasPrefix(name, st.ns+"/") }
	switch st.name {
	case "vap":
		step = func(name string) bool { return name == "ValidatingAdmissionPolicy" }
	case "webhook":
		step = func(name string) bool { return name == "ValidatingAdmissionWebhook" }
	}
	var ds []time.Duration
	for _, name := range names {
		ds = append(ds, admissionSteps(b, w.cs, st.ns, name, step)...)
	}
	if len(ds) == 0 {
		raw, _ := w.cs.CoreV1().RESTClient().Get().Namespace(st.ns).Resource("pods").Name(names[0]).SubResource("trace").DoRaw(context.Background())
		b.Fatalf("%s: no admission step of it in the pods' traces: %s", st.name, raw)
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, st.name+"-server-p50-µs")
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(ds))/1e3, st.name+"-server-mean-µs")
	b.ReportMetric(float64(ds[len(ds)*9/10].Nanoseconds())/1e3, st.name+"-server-p90-µs")
}

// policyBench is the server of the pod-create policy benchmarks with the rule "pods must
// carry the label team" in force in one namespace per case.
type policyBench struct {
	cs      kubernetes.Interface
	modules []policyModule
	// setups are the cases: no policy first, then each language with one and with five
	// plugins, then the ValidatingAdmissionPolicy and the webhook.
	setups []policySetup
	// created counts the pods created, which names them: b.Run calls its function more
	// than once, and names must not repeat.
	created int
}

// policyModule is one language's build of the require-labels plugin.
type policyModule struct {
	lang   string
	wasm   []byte
	config string
}

// policySetup is one case: its name and the namespace its pods are created in.
type policySetup struct {
	name string
	ns   string
}

// startPolicyBench starts an API-only server and sets every case up.
func startPolicyBench(b *testing.B) *policyBench {
	// Five plugins share a namespace: more than the default ceiling for namespaced plugins.
	s := testserver.StartAPI(b, func(c *server.Config) { c.PluginCeilings.PluginsPerNamespace = -1 })
	e := envFor(b, s.Instance)
	cs := s.Clientset(b, false)
	ctx := context.Background()
	rego := wasmtest.Rego(b, "require-labels")
	modules := []policyModule{
		{"rust", wasmtest.Rust(b, "require-labels"), `{"labels":["team"]}`},
		{"c", wasmtest.C(b, "require-labels"), `{"labels":["team"]}`},
		{"assemblyscript", wasmtest.AssemblyScript(b, "require-labels"), `{"labels":["team"]}`},
		{"go", wasmtest.Go(b, "examples/plugins/go/require-labels"), `{"labels":["team"]}`},
		// Gatekeeper's k8srequiredlabels, compiled by OPA: {"labels": [...]} is its
		// parameters. Its build recorded that it reads only labels, so it gets object
		// metadata documents and a projected input (docs/plugins/rego.md); rego-compact
		// is the same module with that record ignored ("wholeInput") and compact pods
		// asked for instead, as a module built by `opa build` alone would be run.
		{"rego", rego, `{"labels":["team"]}`},
		{"rego-compact", rego, `{"compactPods":true,"wholeInput":true,"labels":["team"]}`},
	}
	extra, err := benchModules(os.Getenv("WASMPLANE_BENCH_MODULES"))
	if err != nil {
		b.Fatal(err)
	}
	modules = append(modules, extra...)
	// Plugins are set up once, outside b.Run, which calls its function several times.
	setups := []policySetup{{name: "plugins=0", ns: benchNamespace(b, cs, "bench-none")}}
	for _, m := range modules {
		digest := e.push(b, m.wasm)
		for _, n := range []int{1, 5} {
			ns := benchNamespace(b, cs, fmt.Sprintf("bench-%s-%d", m.lang, n))
			for i := range n {
				e.apply(b, ns, fmt.Sprintf("require-team-%d", i), digest, []wasmv1.Hook{wasmv1.HookValidate}, m.config, wasmv1.Fail)
			}
			setups = append(setups, policySetup{name: fmt.Sprintf("%s/plugins=%d", m.lang, n), ns: ns})
		}
	}
	// The same rule as a ValidatingAdmissionPolicy and as a validating webhook (HTTPS on
	// loopback, in this process), each bound to its own namespace: what an in-process
	// policy and an out-of-process one cost, against the plugins, in the same turns.
	vapNS, hookNS := benchNamespace(b, cs, "bench-vap"), benchNamespace(b, cs, "bench-webhook")
	hook := webhookserver.Start(b, requireteam.Decide)
	in := func(ns string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	}
	ar := cs.AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Create(ctx, requireteam.Policy(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(ctx, requireteam.Binding(in(vapNS)), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, requireteam.Webhook(hook.ClientConfig("/validate"), in(hookNS)), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{vapNS, hookNS} {
		// In force once a pod without the label is refused.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p := simplePod("probe")
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err == nil {
				return false, cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
			}
			return true, nil
		})
		if err != nil {
			b.Fatalf("the policy of %s never refused a pod: %v", ns, err)
		}
	}
	setups = append(setups, policySetup{name: "vap", ns: vapNS}, policySetup{name: "webhook", ns: hookNS})
	return &policyBench{cs: cs, modules: modules, setups: setups}
}

// traceRing is how many objects' traces the API server keeps (trace.DefaultSize).
const traceRing = trace.DefaultSize

// admissionSteps returns the durations of a pod's admission steps whose name step accepts,
// from its trace (pods/NAME/trace).
func admissionSteps(b *testing.B, cs kubernetes.Interface, ns, name string, step func(string) bool) []time.Duration {
	b.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name(name).SubResource("trace").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("trace of %s/%s: %v", ns, name, err)
	}
	var t struct {
		Steps []trace.Step `json:"steps"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		b.Fatalf("trace of %s/%s: %v", ns, name, err)
	}
	var ds []time.Duration
	for _, s := range t.Steps {
		if s.Component == "admission" && step(s.Step) {
			ds = append(ds, s.Duration)
		}
	}
	return ds
}

// benchNamespace creates a namespace named name with its default ServiceAccount.
func benchNamespace(b *testing.B, cs kubernetes.Interface, name string) string {
	b.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating namespace: %v", err)
	}
	// What the ServiceAccount controller does in a whole cluster: without the default
	// account, every create would read etcd for it (twice) instead of the watch cache.
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("creating the default service account: %v", err)
	}
	return name
}
