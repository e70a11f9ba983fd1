// Package workloads holds example container programs for wasmplane's built-in WASI runtime.
// Each subdirectory is a standard Go program built with
//
//	GOOS=wasip1 GOARCH=wasm go build -o NAME.wasm ./examples/workloads/NAME
//
// and imported with `wasmplane image import NAME.wasm --name NAME:latest`. BuildAll builds
// them for tests.
package workloads
