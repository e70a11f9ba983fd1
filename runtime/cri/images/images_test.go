package images

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestNormalize(t *testing.T) {
	digest := "sha256:" + string(bytes.Repeat([]byte("a"), 64))
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "hello", want: "docker.io/library/hello:latest"},
		{in: "hello:v1", want: "docker.io/library/hello:v1"},
		{in: "me/app", want: "docker.io/me/app:latest"},
		{in: "registry.k8s.io/pause:3.10", want: "registry.k8s.io/pause:3.10"},
		{in: "localhost:5000/app", want: "localhost:5000/app:latest"},
		{in: "localhost:5000/app:2", want: "localhost:5000/app:2"},
		{in: "hello@" + digest, want: "docker.io/library/hello@" + digest},
		{in: "Hello", wantErr: true},
		{in: "", wantErr: true},
		{in: "hello@sha256:abc", wantErr: true},
	}
	for _, tc := range tests {
		got, err := Normalize(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// module is a minimal valid wasm header plus distinguishing bytes.
func module(b byte) []byte { return []byte{0, 'a', 's', 'm', 1, 0, 0, 0, b} }

func TestStore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Import(ctx, bytes.NewReader(module(1)), "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Import(ctx, bytes.NewReader(module(1)), "app:latest")
	if err != nil || again.ID != a.ID || len(again.RepoTags) != 2 {
		t.Fatalf("re-import = %+v, %v", again, err)
	}
	// A tag moves to the newer image.
	b, err := s.Import(ctx, bytes.NewReader(module(2)), "app:latest")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Resolve("app"); got.ID != b.ID {
		t.Errorf("app:latest -> %s, want %s", got.ID, b.ID)
	}
	if got, _ := s.Resolve("app:v1"); got.ID != a.ID || len(got.RepoTags) != 1 {
		t.Errorf("app:v1 -> %+v", got)
	}
	if _, err := s.Import(ctx, bytes.NewReader([]byte("#!/bin/sh\necho no\n")), "bad"); err == nil {
		t.Errorf("imported a non-wasm file")
	}

	// Another process's import is seen without reopening.
	other, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	c, err := other.Import(ctx, bytes.NewReader(module(3)), "third")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Resolve("third"); err != nil || got.ID != c.ID {
		t.Errorf("store did not see the other process's import: %v", err)
	}

	if err := s.Remove("app:v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed image resolves: %v", err)
	}
	if _, err := os.Stat(s.BlobPath(a.ID)); !os.IsNotExist(err) {
		t.Errorf("blob left behind: %v", err)
	}
	if err := s.Remove("app:v1"); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	reopened, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.List(); len(got) != 2 {
		t.Errorf("after reopen: %d images, want 2", len(got))
	}
	if _, err := os.Stat(filepath.Join(root, "index.json")); err != nil {
		t.Error(err)
	}
}
