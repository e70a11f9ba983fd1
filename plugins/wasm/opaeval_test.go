package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// opaInstanceOf returns the instance of p, a Rego plugin loaded with one instance and
// called by no one else while the test uses it.
func opaInstanceOf(t *testing.T, r *Runtime, p *Plugin) *instance {
	t.Helper()
	var found *instance
	r.instances.Range(func(_, v any) bool {
		if in := v.(*instance); in.set.p == p && in.opa != nil {
			found = in
			return false
		}
		return true
	})
	if found == nil {
		t.Fatal("the plugin has no instance")
	}
	return found
}

// opaEvalWay evaluates req on in by opa_eval (oneShot) or through the evaluation context,
// whether or not the request is one it pays for, and returns the result set's JSON or the
// error, as callOPA would get them.
func opaEvalWay(in *instance, oneShot bool, req []byte) (string, error) {
	o := in.opa
	saved := o.oneShotPays
	defer func() { o.oneShotPays = saved }()
	o.oneShotPays = oneShot
	in.hook = abi.HookValidate
	out, err := o.result(context.Background(), in, req)
	return string(out), err
}

// randomAdmissionRequest is a validate request about a pod whose labels, annotations,
// containers and size vary, some with strings that need escapes.
func randomAdmissionRequest(rng *rand.Rand) []byte {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	value := func() string { return pick("a", "yes", "", "é\"\\x", "line\nbreak", "\u2028", "ok") }
	labels := map[string]string{}
	for range rng.IntN(5) {
		labels[pick("team", "owner", "app", "conflict", "keep")] = value()
	}
	annotations := map[string]string{}
	for range rng.IntN(4) {
		annotations[pick("deny-a", "deny-b", "note", "x")] = value()
	}
	if rng.IntN(4) == 0 {
		annotations["padding"] = strings.Repeat("p", rng.IntN(16<<10))
	}
	var containers []any
	for i := range 1 + rng.IntN(3) {
		containers = append(containers, map[string]any{"name": fmt.Sprint("c", i), "image": pick("nginx", "registry.local/app:1", "busybox:latest")})
	}
	pod := func() map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "default", "labels": labels, "annotations": annotations},
			"spec":     map[string]any{"containers": containers}}
	}
	req := map[string]any{"uid": "u", "operation": pick("CREATE", "UPDATE", "DELETE"), "name": "p", "namespace": "default",
		"kind": map[string]string{"version": "v1", "kind": "Pod"}, "object": pod()}
	if rng.IntN(2) == 0 {
		req["oldObject"] = pod()
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// builtinsPolicy reads the request under both its names and calls builtins the host
// provides, with JSON operands (sprintf) and with value ones (object.subset).
const builtinsPolicy = `package whole
import rego.v1
violation contains msg if {
	some k, v in input.review.object.metadata.annotations
	startswith(k, "deny")
	msg := sprintf("annotation %s=%v on %s", [k, v, input.request.name])
}
violation contains msg if {
	c := input.review.object.spec.containers[_]
	not startswith(c.image, input.parameters.registry)
	msg := sprintf("image %s of %s", [c.image, c.name])
}
violation contains "kept" if {
	input.request.operation == "DELETE"
	object.subset(input.review.oldObject.metadata.labels, {"keep": "yes"})
}`

// TestRegoOneShotMatchesContext evaluates random requests on Rego policies both by
// opa_eval and through the evaluation context (the path of modules whose ABI predates
// opa_eval, and of requests opa_eval does not pay for), and wants the same result set,
// byte for byte, or the same error: policies reading the request under one name and
// under both, builtins the host provides (JSON and value ones), and a policy that aborts.
// A whole request (no record) is never given to opa_eval.
func TestRegoOneShotMatchesContext(t *testing.T) {
	r, _ := newTestRuntime(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, tc := range []struct {
		name   string
		build  func(t *testing.T) []byte
		config string
		// reads is which names of the request the build recorded the policy reads,
		// "" for the whole input.
		reads string
	}{
		{"require-labels, projected", func(t *testing.T) []byte { return wasmtest.Rego(t, "require-labels") }, `{"labels":["team","owner"]}`, "review"},
		{"builtins, projected", func(t *testing.T) []byte { return wasmtest.RegoSource(t, builtinsPolicy, "whole/violation") }, `{"registry":"registry.local/"}`, "request review"},
		{"conflict aborts", func(t *testing.T) []byte {
			return wasmtest.RegoSource(t, `package conflict
import rego.v1
mode := input.request.operation
mode := "x" if input.request.object.metadata.labels.conflict
deny contains "no delete" if mode == "DELETE"`, "conflict/deny")
		}, `{}`, "request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, r, tc.build(t), PluginConfig{Config: json.RawMessage(tc.config), Limits: Limits{Instances: 1, MaxInstances: 1}})
			in := opaInstanceOf(t, r, p)
			if in.opa.oneShot == nil {
				t.Fatal("a module built by this OPA exports opa_eval (ABI 1.2 or later), but the host does not use it")
			}
			reads := ""
			if pr := in.opa.project; pr != nil {
				reads = strings.TrimSpace(map[bool]string{true: "request"}[pr.request] + " " + map[bool]string{true: "review"}[pr.review])
			}
			if reads != tc.reads {
				t.Fatalf("the policy reads %q of the request, want %q", reads, tc.reads)
			}
			if pays := reads == "request" || reads == "review"; in.opa.oneShotPays != pays {
				t.Fatalf("opa_eval taken: %v, want %v for a policy reading %q", in.opa.oneShotPays, pays, reads)
			}
			kinds := map[string]int{}
			for i := range 300 {
				req := randomAdmissionRequest(rng)
				fast, fastErr := opaEvalWay(in, true, req)
				slow, slowErr := opaEvalWay(in, false, req)
				if fast != slow || fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || KindOf(fastErr) != KindOf(slowErr) {
					t.Fatalf("request %d (%d bytes): opa_eval gives %s (error %v), the evaluation context %s (error %v)\n%s", i, len(req), fast, fastErr, slow, slowErr, req)
				}
				switch {
				case fastErr != nil:
					kinds["error"]++
				case strings.Contains(fast, `"result":[]`) || strings.Contains(fast, `"result":true`):
					kinds["allowed"]++
				default:
					kinds["denied"]++
				}
			}
			t.Logf("answers: %v", kinds)
		})
	}
}

// TestRegoOneShotHeap: opa_eval starts every evaluation from the same heap mark, so that
// evaluations of one request do not grow the memory past the first one's; an input past
// the memory's end (the first request of a new instance) is allocated by the guest, whose
// allocator then knows the memory's size; and requests of other sizes after it are
// answered as the evaluation context answers them.
func TestRegoOneShotHeap(t *testing.T) {
	r, _ := newTestRuntime(t)
	p := load(t, r, wasmtest.Rego(t, "require-labels"), PluginConfig{Config: json.RawMessage(`{"labels":["team"]}`), Limits: Limits{Instances: 1, MaxInstances: 1}})
	in := opaInstanceOf(t, r, p)
	mem := in.mod.Memory()
	free := int(mem.Size()) - int(in.opa.evalHeap)
	for _, tc := range []struct {
		name string
		pad  int
		grow bool
	}{
		// Past the room left past the heap mark of a new instance: the guest grows the
		// memory for it.
		{"past the memory's end", free + 64, true},
		{"small", 10, false},
		{"large", 256 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := podRequest("CREATE", map[string]string{"filler": strings.Repeat("x", tc.pad)})
			before := mem.Size()
			if tc.grow != (uint64(in.opa.evalHeap)+uint64(len(req)) > uint64(before)) {
				t.Fatalf("a %d-byte request at %#x in %d bytes of memory: want the input past the end %v", len(req), in.opa.evalHeap, before, tc.grow)
			}
			first, err := opaEvalWay(in, true, req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := opaEvalWay(in, false, req)
			if err != nil || first != want {
				t.Fatalf("first call: %s, want %s (error %v)", first, want, err)
			}
			size := mem.Size()
			for i := range 20 {
				got, err := opaEvalWay(in, true, req)
				if err != nil || got != want {
					t.Fatalf("call %d: %s (error %v), want %s", i, got, err, want)
				}
				if s := mem.Size(); s != size {
					t.Fatalf("call %d: memory %d bytes, %d before", i, s, size)
				}
			}
		})
	}
	if a := validate(t, p, podRequest("CREATE", map[string]string{"team": "a"})); !a.Allowed {
		t.Fatalf("answer %+v, want allowed", a)
	}
}

// BenchmarkRegoOneShot times the evaluation of a pod create of about 4 KiB, warm and with
// the caches flushed before each call, by opa_eval and through the evaluation context:
// require-labels reads the request under one name (its labels), builtinsPolicy under
// both, so that opa_eval parses it (its annotations and containers) twice.
func BenchmarkRegoOneShot(b *testing.B) {
	r, _ := newTestRuntime(b)
	req := randomAdmissionRequest(rand.New(rand.NewPCG(1, 2)))
	for len(req) < 2<<10 || len(req) > 4<<10 {
		req = randomAdmissionRequest(rand.New(rand.NewPCG(uint64(len(req)), 2)))
	}
	for _, pc := range []struct {
		name, config string
		wasm         []byte
	}{
		{"one-name", `{"labels":["team"]}`, wasmtest.Rego(b, "require-labels")},
		{"both-names", `{"registry":"registry.local/"}`, wasmtest.RegoSource(b, builtinsPolicy, "whole/violation")},
	} {
		p := load(b, r, pc.wasm, PluginConfig{Name: pc.name, Config: json.RawMessage(pc.config), Limits: Limits{Instances: 1, MaxInstances: 1}})
		var in *instance
		r.instances.Range(func(_, v any) bool {
			if i := v.(*instance); i.set.p == p {
				in = i
			}
			return in == nil
		})
		for _, way := range []string{"opa_eval", "context"} {
			for _, cold := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/%s/%s", pc.name, way, map[bool]string{false: "warm", true: "cold"}[cold]), func(b *testing.B) {
					var flush []byte
					if cold {
						flush = make([]byte, 64<<20)
					}
					calls := make([]time.Duration, 0, b.N)
					for range b.N {
						for i := 0; i < len(flush); i += 64 {
							flush[i]++
						}
						start := time.Now()
						if _, err := opaEvalWay(in, way == "opa_eval", req); err != nil {
							b.Fatal(err)
						}
						calls = append(calls, time.Since(start))
					}
					slices.Sort(calls)
					b.ReportMetric(float64(calls[len(calls)/2].Nanoseconds()), "p50-ns")
				})
			}
		}
	}
}
