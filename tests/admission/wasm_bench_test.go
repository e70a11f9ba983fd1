package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// the webhook.
func BenchmarkPodCreateWasmValidate(b *testing.B) {
	// Five plugins share a namespace: more than the default ceiling for namespaced plugins.
	s := testserver.StartAPI(b, func(c *server.Config) { c.PluginCeilings.PluginsPerNamespace = -1 })
	e := envFor(b, s.Instance)
	cs := s.Clientset(b, false)
	ctx := context.Background()
	rego := wasmtest.Rego(b, "require-labels")
	modules := []struct {
		lang   string
		wasm   []byte
		config string
	}{
		{"rust", wasmtest.Rust(b, "require-labels"), `{"labels":["team"]}`},
		{"c", wasmtest.C(b, "require-labels"), `{"labels":["team"]}`},
		{"assemblyscript", wasmtest.AssemblyScript(b, "require-labels"), `{"labels":["team"]}`},
		{"go", wasmtest.Go(b, "examples/plugins/go/require-labels"), `{"labels":["team"]}`},
		// Gatekeeper's k8srequiredlabels, compiled by OPA: {"labels": [...]} is its
		// parameters. It reads only labels, so it may ask for compact pods as the other
		// languages' examples do (docs/plugins/rego.md); both are measured.
		{"rego", rego, `{"labels":["team"]}`},
		{"rego-compact", rego, `{"compactPods":true,"labels":["team"]}`},
	}
	type setup struct {
		name string
		ns   string
	}
	// Plugins are set up once, outside b.Run, which calls its function several times.
	setups := []setup{{name: "plugins=0", ns: benchNamespace(b, cs, "bench-none")}}
	for _, m := range modules {
		digest := e.push(b, m.wasm)
		for _, n := range []int{1, 5} {
			ns := benchNamespace(b, cs, fmt.Sprintf("bench-%s-%d", m.lang, n))
			for i := range n {
				e.apply(b, ns, fmt.Sprintf("require-team-%d", i), digest, []wasmv1.Hook{wasmv1.HookValidate}, m.config, wasmv1.Fail)
			}
			setups = append(setups, setup{name: fmt.Sprintf("%s/plugins=%d", m.lang, n), ns: ns})
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
	setups = append(setups, setup{name: "vap", ns: vapNS}, setup{name: "webhook", ns: hookNS})
	// The cases take turns, one create each, rather than running one after another: the
	// server's state (pods stored, caches, heap) drifts over a run by more than one
	// plugin costs, and taking turns makes every case see the same drift.
	created := 0 // b.Run calls its function more than once; names must not repeat
	b.Run("interleaved", func(b *testing.B) {
		create := func(ns string) (string, time.Duration) {
			p := simplePod(fmt.Sprintf("p-%d", created))
			p.Labels = map[string]string{"team": "bench"}
			created++
			start := time.Now()
			if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			return p.Name, time.Since(start)
		}
		// Warm the plugins' instance pools and the client's connection.
		for range 20 {
			for _, st := range setups {
				create(st.ns)
			}
		}
		lat := make([][]time.Duration, len(setups))
		names := make([][]string, len(setups))
		b.ResetTimer()
		for range b.N {
			for i, st := range setups {
				name, d := create(st.ns)
				lat[i] = append(lat[i], d)
				names[i] = append(names[i], name)
			}
		}
		b.StopTimer()
		p50 := make(map[string]float64, len(setups))
		for i, st := range setups {
			slices.Sort(lat[i])
			p50[st.name] = float64(lat[i][len(lat[i])/2].Microseconds())
			b.ReportMetric(p50[st.name], st.name+"-p50-µs")
			b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Microseconds()), st.name+"-p99-µs")
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
		// of each case: the trace ring keeps the last 4,096 objects): a plugin's call as
		// the admission chain times it, the policy's and the webhook's admission step.
		// Unlike the differences of p50s above it does not move with the rest of a
		// create, so it tells one language from another on a loaded machine.
		sampled := min(b.N, traceRing/len(setups)-1)
		for i, st := range setups {
			var step func(name string) bool
			switch st.name {
			case "plugins=0":
				continue
			case "vap":
				step = func(name string) bool { return name == "ValidatingAdmissionPolicy" }
			case "webhook":
				step = func(name string) bool { return name == "ValidatingAdmissionWebhook" }
			default:
				step = func(name string) bool { return strings.HasPrefix(name, st.ns+"/") }
			}
			var ds []time.Duration
			for _, name := range names[i][len(names[i])-sampled:] {
				ds = append(ds, admissionSteps(b, cs, st.ns, name, step)...)
			}
			if len(ds) == 0 {
				raw, _ := cs.CoreV1().RESTClient().Get().Namespace(st.ns).Resource("pods").Name(names[i][0]).SubResource("trace").DoRaw(ctx)
				b.Fatalf("%s: no admission step of it in the pods' traces: %s", st.name, raw)
			}
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, st.name+"-server-p50-µs")
		}
	})
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
