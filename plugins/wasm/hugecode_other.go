//go:build !linux

package wasm

// codeMappings is Linux-only; elsewhere compiled code stays on the pages wazero chose.
func codeMappings() map[uintptr]uintptr { return nil }

func backNewCodeWithHugePages(map[uintptr]uintptr) {}
