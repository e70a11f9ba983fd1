package toolkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// ReadJSONFile reads a JSON object from a file ("-" is standard input), as plugin
// requests and configs are: anything else is refused before a module sees it.
func ReadJSONFile(path string, stdin io.Reader) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("%s: not a JSON object (null)", path)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c.Bytes(), nil
}

// DefaultCacheDir is where `plugin test` and `plugin bench` keep compiled modules, so a
// second run of the same module skips compilation (about a second for standard Go).
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "wasmplane", "wasm")
}

// RunOptions say how to load a module for local runs.
type RunOptions struct {
	// Name names the plugin in logs and errors (default "local").
	Name string
	// Config is passed to configure (nil = {}).
	Config json.RawMessage
	// Timeout is the deadline of one call (default the host's, 1 s).
	Timeout time.Duration
	// Instances is the pool size (default 1; bench sets its parallelism).
	Instances int
	// CacheDir is the compilation cache ("" = in memory).
	CacheDir string
	// Logger receives the plugin's log lines (default: discarded).
	Logger *slog.Logger
}

// Runner is a module loaded through the real host, as the API server and the scheduler
// load it, for local runs.
type Runner struct {
	rt *wasm.Runtime
	p  *wasm.Plugin
}

// Open compiles and loads a module (configure runs with opts.Config). Errors carry the
// host's kinds (wasm.KindOf).
func Open(ctx context.Context, module []byte, opts RunOptions) (*Runner, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Name == "" {
		opts.Name = "local"
	}
	if opts.Instances <= 0 {
		opts.Instances = 1
	}
	rt, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: opts.CacheDir, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	m, err := rt.Compile(ctx, module, "")
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	defer m.Close(ctx)
	p, err := rt.Load(ctx, m, wasm.PluginConfig{Name: opts.Name, Config: opts.Config,
		Limits: wasm.Limits{Timeout: opts.Timeout, Instances: opts.Instances, MaxInstances: opts.Instances}})
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	return &Runner{rt: rt, p: p}, nil
}

// Hooks lists the hooks the module exports.
func (r *Runner) Hooks() []string {
	var out []string
	for _, h := range PluginHooks() {
		if r.p.Implements(h) {
			out = append(out, h)
		}
	}
	return out
}

// Close unloads the plugin and stops the runtime.
func (r *Runner) Close(ctx context.Context) error {
	err := r.p.Close(ctx)
	if cerr := r.rt.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// Call is a request decoded once and ready to be sent many times (bench).
type Call struct {
	// Do sends the request and returns the host's decoded answer as JSON.
	Do func(ctx context.Context) ([]byte, error)
}

// Prepare decodes a request file's JSON for hook the way the host's callers build it,
// and returns a call through the host's typed entry point, so the answer is checked as
// the API server or the scheduler would check it (a missing "allowed" is bad-output).
// Scheduling requests take {"pod": {...}, "nodes": [Node, ...], "requested": [...]};
// nodes without a uid or resourceVersion get stand-ins so the node cache can key them.
func (r *Runner) Prepare(hook string, req json.RawMessage) (*Call, error) {
	h, err := ParseHook(hook)
	if err != nil {
		return nil, err
	}
	decode := func(v any) error {
		if err := json.Unmarshal(req, v); err != nil {
			return fmt.Errorf("request for %s: %w", h, err)
		}
		return nil
	}
	answer := func(v any, err error) ([]byte, error) {
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding the answer: %w", err)
		}
		return b, nil
	}
	switch h {
	case abi.HookValidate, abi.HookMutate:
		var ar abi.AdmissionRequest
		if err := decode(&ar); err != nil {
			return nil, err
		}
		if h == abi.HookValidate {
			// What the server sends a plugin that asked for compact pods or object
			// metadata (ABI §7.3).
			if form := r.p.ObjectForm(); form != wasm.WholeObjects {
				for _, obj := range []*json.RawMessage{&ar.Object, &ar.OldObject} {
					var err error
					if *obj, err = objectDocument(*obj, form); err != nil {
						return nil, fmt.Errorf("request: %w", err)
					}
				}
			}
			return &Call{Do: func(ctx context.Context) ([]byte, error) { return answer(r.p.Validate(ctx, &ar)) }}, nil
		}
		return &Call{Do: func(ctx context.Context) ([]byte, error) { return answer(r.p.Mutate(ctx, &ar)) }}, nil
	case abi.HookAuthenticate:
		var ar abi.AuthenticateRequest
		if err := decode(&ar); err != nil {
			return nil, err
		}
		return &Call{Do: func(ctx context.Context) ([]byte, error) { return answer(r.p.Authenticate(ctx, &ar)) }}, nil
	case abi.HookInitialize:
		var ir abi.InitializeRequest
		if err := decode(&ir); err != nil {
			return nil, err
		}
		return &Call{Do: func(ctx context.Context) ([]byte, error) { return answer(r.p.Initialize(ctx, &ir)) }}, nil
	}
	in, err := schedulingInput(req, r.p.WantsFullPods())
	if err != nil {
		return nil, err
	}
	if h == abi.HookFilter {
		return &Call{Do: func(ctx context.Context) ([]byte, error) { return answer(r.p.Filter(ctx, in)) }}, nil
	}
	return &Call{Do: func(ctx context.Context) ([]byte, error) {
		scores, err := r.p.Score(ctx, in)
		return answer(abi.ScoreResponse{Scores: scores}, err)
	}}, nil
}

// objectDocument turns an object's JSON into the document of form a validate request
// carries (ABI §7.3); null, absence and what is not an object are returned unchanged.
func objectDocument(raw json.RawMessage, form wasm.ObjectForm) (json.RawMessage, error) {
	if form == wasm.CompactPods {
		return compactPodDocument(raw)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil
	}
	var u unstructured.Unstructured
	if err := json.Unmarshal(raw, &u.Object); err != nil {
		return nil, fmt.Errorf("object: %w", err)
	}
	doc, ok := wasm.AppendObjectMetadata(nil, &u, schema.GroupVersionKind{}, nil)
	if !ok {
		return raw, nil
	}
	return doc, nil
}

// compactPodDocument turns a v1 Pod's JSON into its compact pod document (ABI §7.5);
// anything else is returned unchanged.
func compactPodDocument(raw json.RawMessage) (json.RawMessage, error) {
	var tm struct{ APIVersion, Kind string }
	if len(raw) == 0 || json.Unmarshal(raw, &tm) != nil || tm.APIVersion != "v1" || tm.Kind != "Pod" {
		return raw, nil
	}
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	return wasm.CompactPodJSON(&pod)
}

// schedulingInput turns a filter/score request file into the host's input as the
// scheduler builds it: the pod compact unless fullPods (ABI §7.5), nodes serialized
// through a NodeCache.
func schedulingInput(req json.RawMessage, fullPods bool) (*wasm.SchedulingInput, error) {
	var sr struct {
		Pod       json.RawMessage `json:"pod"`
		Nodes     []corev1.Node   `json:"nodes"`
		Requested []abi.Resources `json:"requested"`
	}
	if err := json.Unmarshal(req, &sr); err != nil {
		return nil, fmt.Errorf("scheduling request: %w", err)
	}
	if len(sr.Pod) == 0 || string(sr.Pod) == "null" {
		return nil, fmt.Errorf("scheduling request: \"pod\" is required")
	}
	if sr.Requested != nil && len(sr.Requested) != len(sr.Nodes) {
		return nil, fmt.Errorf("scheduling request: %d \"requested\" entries for %d nodes", len(sr.Requested), len(sr.Nodes))
	}
	if !fullPods {
		var pod corev1.Pod
		if err := json.Unmarshal(sr.Pod, &pod); err != nil {
			return nil, fmt.Errorf("scheduling request: pod: %w", err)
		}
		var err error
		if sr.Pod, err = wasm.CompactPodJSON(&pod); err != nil {
			return nil, fmt.Errorf("scheduling request: pod: %w", err)
		}
	}
	cache := wasm.NewNodeCache()
	in := &wasm.SchedulingInput{Pod: sr.Pod, Requested: sr.Requested}
	for i := range sr.Nodes {
		n := &sr.Nodes[i]
		if n.UID == "" {
			n.UID = types.UID("request-node-" + strconv.Itoa(i))
		}
		if n.ResourceVersion == "" {
			n.ResourceVersion = "1"
		}
		d, err := cache.Document(n)
		if err != nil {
			return nil, err
		}
		in.Nodes = append(in.Nodes, d)
	}
	return in, nil
}
