package blobs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/storage/storagetest"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	return New(storagetest.Client(t), "/test/blobs")
}

func TestPutGetDelete(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		size   int
		chunks int
	}{
		{"small", 100, 1},
		{"exactly one chunk", ChunkSize, 1},
		{"several chunks", 3*ChunkSize + 7, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := bytes.Repeat([]byte{byte(tt.size)}, tt.size)
			data[0] = 1
			digest, chunks, err := s.Put(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			if chunks != tt.chunks || digest != Digest(data) {
				t.Fatalf("chunks %d digest %s, want %d %s", chunks, digest, tt.chunks, Digest(data))
			}
			got, err := s.Get(ctx, digest)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("get: %v (equal %v)", err, bytes.Equal(got, data))
			}
			// Putting the same bytes again is harmless.
			if d2, _, err := s.Put(ctx, data); err != nil || d2 != digest {
				t.Fatalf("second put: %v %s", err, d2)
			}
			if err := s.Delete(ctx, digest); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, digest); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after delete: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, _, err := s.Put(ctx, nil); err == nil {
		t.Error("empty blob accepted")
	}
	if _, _, err := s.Put(ctx, make([]byte, MaxBlobSize+1)); err == nil {
		t.Error("oversize blob accepted")
	}
	for _, d := range []string{"sha256:abc", "sha256:" + strings.Repeat("A", 64), strings.Repeat("z", 64)} {
		if _, err := s.Get(ctx, d); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("digest %q: %v, want a parse error", d, err)
		}
	}
	if _, err := s.Get(ctx, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown digest: %v, want ErrNotFound", err)
	}
}

func TestCorruptionDetected(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	digest, _, err := s.Put(ctx, []byte("\x00asm\x01\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := ParseDigest(digest)
	if _, err := s.client.Put(ctx, s.chunkKey(h, 0), "tampered"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, digest); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("tampered blob: %v, want a corruption error", err)
	}
}
