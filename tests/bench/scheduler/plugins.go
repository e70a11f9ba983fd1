package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler"
	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/examples/scheduling/native"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/schedplugin"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
)

// The example plugins the bench adds with -plugins, configured so that every node passes
// the filter (bench nodes carry only the hostname label) and every node is scored: the
// figure is the cost of running the plugins, not of a smaller feasible set.
const (
	benchFilterLabel = "kubernetes.io/hostname"
	benchScoreLabel  = "kubernetes.io/hostname"
	filterPkg        = "examples/plugins/go/node-label-filter"
	scorePkg         = "examples/plugins/go/label-score"
)

// addPlugins joins the example Filter+Score plugins to s's profiles: mode "native" adds
// their Go twins, "wasm" the example modules through the WASM adapter with the given call
// bounds (zero fields: a scheduler's defaults, schedplugin.CallBounds), "wasm-unbounded" the same with the bounds lifted (to measure what
// the bounds cost), "" nothing. The returned cleanup closes what it loaded.
func addPlugins(ctx context.Context, s *scheduler.Scheduler, mode string, bounds wasm.CallBounds, log *slog.Logger) (cleanup func(), err error) {
	mode, lang, _ := strings.Cut(mode, "/") // "wasm/rust": the Rust examples

	if lang == "" {
		lang = "go"
	}
	switch mode {
	case "":
		return func() {}, nil
	case "native":
		for _, ext := range []framework.Extension{
			{Plugin: &native.NodeLabelFilter{PluginName: "NodeLabelFilter", Label: benchFilterLabel}},
			{Plugin: &native.LabelScore{PluginName: "LabelScore", Label: benchScoreLabel}},
		} {
			if err := s.SetExtension(ext); err != nil {
				return nil, err
			}
		}
		return func() {}, nil
	case "wasm":
	case "wasm-unbounded":
		// As many slots as calls can ever run at once: no call waits for one.
		bounds = wasm.CallBounds{MaxConcurrentCalls: 1 << 16, MaxConcurrentCallsPerPlugin: 1 << 16}
	default:
		return nil, fmt.Errorf("-plugins %q: want native, wasm, compare or bounds", mode)
	}
	dir, err := os.MkdirTemp("", "wasmplane-bench-wasm-")
	if err != nil {
		return nil, err
	}
	rt, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: filepath.Join(dir, "cache"), Logger: log, CallBounds: schedplugin.CallBounds(bounds)})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var plugins []*wasm.Plugin
	cleanup = func() {
		for _, p := range plugins {
			_ = p.Close(context.Background())
		}
		_ = rt.Close(context.Background())
		_ = os.RemoveAll(dir)
	}
	nodes := wasm.NewNodeCache()
	for _, pl := range []struct {
		pkg, name, config string
		filter            bool
	}{
		{filterPkg, "node-label-filter", `{"label":"` + benchFilterLabel + `"}`, true},
		{scorePkg, "label-score", `{"label":"` + benchScoreLabel + `"}`, false},
	} {
		p, err := loadExample(ctx, rt, dir, lang, pl.pkg, pl.name, pl.config)
		if err != nil {
			cleanup()
			return nil, err
		}
		plugins = append(plugins, p)
		a, err := schedplugin.New(schedplugin.Config{Name: "wasm:" + pl.name, Plugin: p, Filter: pl.filter, Score: !pl.filter, Nodes: nodes, Logger: log})
		if err != nil {
			cleanup()
			return nil, err
		}
		if err := s.SetExtension(framework.Extension{Plugin: a}); err != nil {
			cleanup()
			return nil, err
		}
	}
	return cleanup, nil
}

// loadExample builds an example plugin for WebAssembly — the Go package pkg for wasip1,
// as `wasmplane plugin build` does, or the Rust example of the same name — compiles and
// loads it.
func loadExample(ctx context.Context, rt *wasm.Runtime, dir, lang, pkg, name, config string) (*wasm.Plugin, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	file := filepath.Join(dir, name+".wasm")
	var steps [][]string
	env := os.Environ()
	switch lang {
	case "go":
		steps = [][]string{toolchain.GoArgs(file, "./"+pkg)}
		env = append(env, toolchain.GoEnv()...)
	case "rust":
		rustc, target, err := toolchain.Rust()
		if err != nil {
			return nil, err
		}
		work, err := os.MkdirTemp(dir, "rust-")
		if err != nil {
			return nil, err
		}
		steps = toolchain.RustArgs(rustc, target, file, work, "sdk/rust/src/lib.rs", strings.ReplaceAll(name, "-", "_"),
			filepath.Join("examples/plugins/rust", name, "src/lib.rs"))
	default:
		return nil, fmt.Errorf("-lang %q: want go or rust", lang)
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = root
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s (%s): %w\n%s", name, lang, err, stderr.String())
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m, err := rt.Compile(ctx, b, wasm.Digest(b))
	if err != nil {
		return nil, err
	}
	defer m.Close(ctx)
	// The first call of each instance decodes every node document into its node table:
	// with thousands of nodes that takes longer than the default 1 s deadline.
	p, err := rt.Load(ctx, m, wasm.PluginConfig{Name: name, Config: json.RawMessage(config), Limits: wasm.Limits{Timeout: 30 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", name, err)
	}
	return p, nil
}
