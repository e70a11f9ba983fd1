// Package blobs keeps content-addressed byte blobs (WASM modules) in etcd, split into
// chunks small enough for any etcd's request limit, so that every API server of a
// cluster can fetch a module by digest: etcd replicates them like any other key.
package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ChunkSize keeps each value well under etcd's default 1.5 MiB request limit.
const ChunkSize = 512 * 1024

// MaxBlobSize bounds one blob (a module).
const MaxBlobSize = 64 << 20

// ErrNotFound is returned for a digest that is not stored.
var ErrNotFound = errors.New("blob not found")

// Store keeps blobs under a key prefix.
type Store struct {
	client *clientv3.Client
	prefix string
}

// New returns a store under prefix (e.g. "/wasmplane/blobs").
func New(client *clientv3.Client, prefix string) *Store {
	return &Store{client: client, prefix: strings.TrimSuffix(prefix, "/")}
}

// Digest is the "sha256:<hex>" digest of data.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParseDigest validates "sha256:<hex>" (or bare hex) and returns the hex part.
func ParseDigest(d string) (string, error) {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) != 64 {
		return "", fmt.Errorf("digest %q: want sha256:<64 hex digits>", d)
	}
	if _, err := hex.DecodeString(h); err != nil || strings.ToLower(h) != h {
		return "", fmt.Errorf("digest %q: want lowercase hex", d)
	}
	return h, nil
}

func (s *Store) chunkKey(hexDigest string, i int) string {
	return s.prefix + "/" + hexDigest + "/chunk/" + strconv.Itoa(i)
}

func (s *Store) manifestKey(hexDigest string) string { return s.prefix + "/" + hexDigest + "/manifest" }

// Put stores data and returns its digest and chunk count. The manifest is written last,
// so a reader never sees a partial blob; putting the same bytes twice is harmless.
func (s *Store) Put(ctx context.Context, data []byte) (string, int, error) {
	if len(data) == 0 {
		return "", 0, errors.New("blob is empty")
	}
	if len(data) > MaxBlobSize {
		return "", 0, fmt.Errorf("blob is %d bytes; the limit is %d", len(data), MaxBlobSize)
	}
	digest := Digest(data)
	h := strings.TrimPrefix(digest, "sha256:")
	chunks := 0
	for off := 0; off < len(data); off += ChunkSize {
		end := min(off+ChunkSize, len(data))
		if _, err := s.client.Put(ctx, s.chunkKey(h, chunks), string(data[off:end])); err != nil {
			return "", 0, fmt.Errorf("storing chunk %d of %s: %w", chunks, digest, err)
		}
		chunks++
	}
	manifest := strconv.Itoa(len(data)) + "/" + strconv.Itoa(chunks)
	if _, err := s.client.Put(ctx, s.manifestKey(h), manifest); err != nil {
		return "", 0, fmt.Errorf("storing manifest of %s: %w", digest, err)
	}
	return digest, chunks, nil
}

// Get returns the bytes of digest, verified against it.
func (s *Store) Get(ctx context.Context, digest string) ([]byte, error) {
	h, err := ParseDigest(digest)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, s.manifestKey(h))
	if err != nil {
		return nil, fmt.Errorf("reading manifest of %s: %w", digest, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotFound
	}
	var size, chunks int
	if _, err := fmt.Sscanf(string(resp.Kvs[0].Value), "%d/%d", &size, &chunks); err != nil {
		return nil, fmt.Errorf("manifest of %s: %w", digest, err)
	}
	data := make([]byte, 0, size)
	for i := range chunks {
		r, err := s.client.Get(ctx, s.chunkKey(h, i))
		if err != nil {
			return nil, fmt.Errorf("reading chunk %d of %s: %w", i, digest, err)
		}
		if len(r.Kvs) == 0 {
			return nil, fmt.Errorf("chunk %d of %s is missing", i, digest)
		}
		data = append(data, r.Kvs[0].Value...)
	}
	if Digest(data) != "sha256:"+h {
		return nil, fmt.Errorf("blob %s is corrupt: its bytes hash to %s", digest, Digest(data))
	}
	return data, nil
}

// Delete removes a blob (manifest first, so readers stop seeing it at once).
func (s *Store) Delete(ctx context.Context, digest string) error {
	h, err := ParseDigest(digest)
	if err != nil {
		return err
	}
	if _, err := s.client.Delete(ctx, s.manifestKey(h)); err != nil {
		return fmt.Errorf("deleting manifest of %s: %w", digest, err)
	}
	if _, err := s.client.Delete(ctx, s.prefix+"/"+h+"/chunk/", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("deleting chunks of %s: %w", digest, err)
	}
	return nil
}
