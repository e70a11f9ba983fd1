// Package toolkit is the logic behind `wasmplane plugin`: it scaffolds plugin projects in
// every SDK language, builds them with the same toolchain flags the test suite uses, runs
// and benchmarks a module through the real host (plugins/wasm), and pushes modules and
// plugin objects to a cluster with client-go's REST client. The command stays thin so the
// same code is exercised by tests.
package toolkit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// Lang is a plugin source language.
type Lang string

// The languages the SDKs (sdk/) support.
const (
	Go             Lang = "go"
	C              Lang = "c"
	AssemblyScript Lang = "assemblyscript"
	Rust           Lang = "rust"
	WAT            Lang = "wat"
	// Rego policies are compiled by OPA to its own WebAssembly ABI, which the host
	// speaks for validate hooks (plugins/wasm/opa.go).
	Rego Lang = "rego"
)

// Langs lists every supported language, in the order help texts show them.
func Langs() []Lang { return []Lang{Go, C, AssemblyScript, Rust, WAT, Rego} }

// ParseLang accepts a language name or a common alias ("as", "golang", "rs").
func ParseLang(s string) (Lang, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "go", "golang":
		return Go, nil
	case "c":
		return C, nil
	case "assemblyscript", "as", "ts":
		return AssemblyScript, nil
	case "rust", "rs":
		return Rust, nil
	case "wat", "wasm-text":
		return WAT, nil
	case "rego", "opa":
		return Rego, nil
	}
	return "", fmt.Errorf("unknown language %q (want one of %s)", s, joinLangs())
}

func joinLangs() string {
	var s []string
	for _, l := range Langs() {
		s = append(s, string(l))
	}
	return strings.Join(s, ", ")
}

// PluginHooks are the hooks a plugin object may name (every ABI hook but configure,
// which is called by the host on its own).
func PluginHooks() []string {
	return []string{abi.HookValidate, abi.HookMutate, abi.HookFilter, abi.HookScore, abi.HookAuthenticate, abi.HookInitialize}
}

// ParseHook checks one hook name.
func ParseHook(s string) (string, error) {
	h := strings.ToLower(strings.TrimSpace(s))
	if !slices.Contains(PluginHooks(), h) {
		return "", fmt.Errorf("unknown hook %q (want one of %s)", s, strings.Join(PluginHooks(), ", "))
	}
	return h, nil
}

// ParseHooks checks a list of hook names (each may itself be comma-separated), dropping
// duplicates and keeping the order given.
func ParseHooks(list []string) ([]string, error) {
	var out []string
	for _, item := range list {
		for _, s := range strings.Split(item, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			h, err := ParseHook(s)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no hook given (want one or more of %s)", strings.Join(PluginHooks(), ", "))
	}
	return out, nil
}
