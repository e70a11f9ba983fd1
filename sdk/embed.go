// Package sdk carries the plugin SDKs inside the wasmplane binary, so that `wasmplane
// plugin init` writes a project that builds on its own, in any directory, with no
// wasmplane checkout: the project gets a copy of its language's SDK. The files are the
// ones in this directory, as they are in the repository.
package sdk

import (
	"embed"
	"io/fs"
)

// files are the SDK sources (not the tests, the Rust build output or node_modules):
// the ABI, the Go packages, the Rust crate, the C header and source, the AssemblyScript
// library with the package.json that pins its compiler, and each SDK's README.
//
//go:embed ABI.md go rust/Cargo.toml rust/src rust/README.md c/wasmplane.h c/wasmplane.c c/README.md
//go:embed assemblyscript/assembly assemblyscript/package.json assemblyscript/README.md wat/README.md
var files embed.FS

// Files returns the SDK tree, rooted like the repository's sdk/ directory (ABI.md,
// go/…, rust/…, c/…, assemblyscript/…, wat/…).
func Files() fs.FS { return files }
