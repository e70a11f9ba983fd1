package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/runtime/cri/images"
)

// TestImageDataDir checks that `image` finds the store of `up --data-dir X`'s node with
// --data-dir X, and a runtime's own state directory with --root.
func TestImageDataDir(t *testing.T) {
	module := filepath.Join(t.TempDir(), "empty.wasm")
	if err := os.WriteFile(module, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir, root := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name  string
		flags []string
		store string
	}{
		{"data-dir", []string{"--data-dir", dataDir}, filepath.Join(dataDir, "node", "runtime", "images")},
		{"root", []string{"--root", root}, filepath.Join(root, "images")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustRun(t, append([]string{"image", "import", module, "--name", "empty:" + tc.name}, tc.flags...)...)
			store, err := images.Open(tc.store)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Resolve("empty:" + tc.name); err != nil {
				t.Fatalf("the image is not in %s: %v", tc.store, err)
			}
			if out := mustRun(t, append([]string{"image", "ls"}, tc.flags...)...); !strings.Contains(out, "docker.io/library/empty") || !strings.Contains(out, tc.name) {
				t.Errorf("image ls printed %q", out)
			}
		})
	}
	if _, err := run(t, "image", "ls", "--data-dir", dataDir, "--root", root); err == nil {
		t.Error("--data-dir with --root: want an error")
	}
}
