// Package images is the built-in runtime's local image store: WASI modules kept by the
// sha256 of their bytes, with Docker-style repository tags pointing at them.
//
// Reference normalization follows Docker: `hello` is `docker.io/library/hello:latest`,
// `me/app:v1` is `docker.io/me/app:v1`, `registry.k8s.io/pause:3.10` stays as it is, and a
// digest reference `name@sha256:<hex>` or a bare id `sha256:<hex>` (or a unique prefix of
// the hex of at least 12 characters) names the image whatever its tags.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned (wrapped) when a reference names no image in the store.
var ErrNotFound = errors.New("image not found in the local store")

// wasmMagic is the first four bytes of every WebAssembly binary module.
var wasmMagic = []byte{0x00, 'a', 's', 'm'}

// Image is one stored module.
type Image struct {
	// ID is "sha256:<hex>" of the module bytes.
	ID string `json:"id"`
	// Size is the module's length in bytes.
	Size int64 `json:"size"`
	// RepoTags are normalized "repo:tag" names.
	RepoTags []string `json:"repoTags"`
	// Created is when the bytes were first imported.
	Created time.Time `json:"created"`
}

// Digest returns the hex sha256 without the "sha256:" prefix.
func (i Image) Digest() string { return strings.TrimPrefix(i.ID, "sha256:") }

// RepoDigests returns "repo@sha256:<hex>" for every repository the image is tagged in.
func (i Image) RepoDigests() []string {
	var out []string
	for _, t := range i.RepoTags {
		repo, _ := splitTag(t)
		d := repo + "@" + i.ID
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// Store is a content-addressed image store rooted at a directory:
//
//	<root>/blobs/sha256/<hex>   module bytes
//	<root>/index.json           images and tags, rewritten atomically on every change
//
// It is safe for concurrent use. Another process (`wasmplane image import` next to a running
// runtime) may change the index too: every operation reloads it when its modification time
// or size changed, so the runtime sees new images without a restart.
type Store struct {
	root string
	mu   sync.Mutex
	imgs map[string]*Image // by ID

	loadedMod  time.Time
	loadedSize int64
}

type indexFile struct {
	Images []*Image `json:"images"`
}

// Open opens (creating if needed) the store at root.
func Open(root string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(root, "blobs", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("images: create store %s: %w", root, err)
	}
	s := &Store{root: root, imgs: map[string]*Image{}}
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// reloadLocked rereads index.json if it changed since it was last read or written.
func (s *Store) reloadLocked() error {
	fi, err := os.Stat(s.indexPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("images: stat index: %w", err)
	}
	if fi.ModTime().Equal(s.loadedMod) && fi.Size() == s.loadedSize {
		return nil
	}
	b, err := os.ReadFile(s.indexPath())
	if err != nil {
		return fmt.Errorf("images: read index: %w", err)
	}
	var idx indexFile
	if err := json.Unmarshal(b, &idx); err != nil {
		return fmt.Errorf("images: decode index %s: %w", s.indexPath(), err)
	}
	s.imgs = map[string]*Image{}
	for _, im := range idx.Images {
		s.imgs[im.ID] = im
	}
	s.loadedMod, s.loadedSize = fi.ModTime(), fi.Size()
	return nil
}

// refreshLocked reloads the index, logging nothing: a read error keeps the images known.
func (s *Store) refreshLocked() { _ = s.reloadLocked() }

// Root returns the store's directory.
func (s *Store) Root() string { return s.root }

func (s *Store) indexPath() string { return filepath.Join(s.root, "index.json") }

// BlobPath returns where the module bytes of image id live.
func (s *Store) BlobPath(id string) string {
	return filepath.Join(s.root, "blobs", "sha256", strings.TrimPrefix(id, "sha256:"))
}

// Normalize turns a reference into its canonical "registry/repo:tag" form (Docker rules).
// Digest references ("repo@sha256:…") keep their digest and get no tag.
func Normalize(ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return "", errors.New("images: empty image reference")
	}
	if strings.ContainsAny(ref, " \t\n") || strings.ToLower(repoPart(ref)) != repoPart(ref) {
		return "", fmt.Errorf("images: invalid reference %q (repository names are lower case)", ref)
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	repo, tag := splitTag(name)
	if repo == "" {
		return "", fmt.Errorf("images: invalid reference %q", ref)
	}
	first, rest, hasSlash := strings.Cut(repo, "/")
	switch {
	case !hasSlash:
		repo = "docker.io/library/" + repo
	case strings.ContainsAny(first, ".:") || first == "localhost":
		// first component is a registry host
	default:
		repo = "docker.io/" + first + "/" + rest
	}
	if hasDigest {
		if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
			return "", fmt.Errorf("images: invalid digest in %q", ref)
		}
		return repo + "@" + digest, nil
	}
	if tag == "" {
		tag = "latest"
	}
	return repo + ":" + tag, nil
}

func repoPart(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	r, _ := splitTag(name)
	return r
}

// splitTag splits "repo:tag"; a colon inside the registry host (a port) is not a tag.
func splitTag(name string) (repo, tag string) {
	i := strings.LastIndexByte(name, ':')
	if i < 0 || strings.Contains(name[i+1:], "/") {
		return name, ""
	}
	return name[:i], name[i+1:]
}

// Import stores the module read from r and tags it with names (normalized). Importing the
// same bytes again only adds tags. A tag moves from any image that held it before.
func (s *Store) Import(ctx context.Context, r io.Reader, names ...string) (Image, error) {
	if err := ctx.Err(); err != nil {
		return Image{}, err
	}
	tags := make([]string, 0, len(names))
	for _, n := range names {
		t, err := Normalize(n)
		if err != nil {
			return Image{}, err
		}
		if strings.Contains(t, "@") {
			return Image{}, fmt.Errorf("images: cannot tag with a digest reference %q", n)
		}
		tags = append(tags, t)
	}
	tmp, err := os.CreateTemp(filepath.Join(s.root, "blobs"), "import-*")
	if err != nil {
		return Image{}, fmt.Errorf("images: temp file: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Image{}, fmt.Errorf("images: write module: %w", err)
	}
	head := make([]byte, 4)
	if f, err := os.Open(tmp.Name()); err == nil {
		_, _ = io.ReadFull(f, head)
		f.Close()
	}
	if n < 8 || string(head) != string(wasmMagic) {
		return Image{}, errors.New("images: not a WebAssembly binary module (missing \\0asm header)")
	}
	id := "sha256:" + hex.EncodeToString(h.Sum(nil))

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return Image{}, err
	}
	if err := os.Rename(tmp.Name(), s.BlobPath(id)); err != nil {
		return Image{}, fmt.Errorf("images: store module: %w", err)
	}
	im, ok := s.imgs[id]
	if !ok {
		im = &Image{ID: id, Size: n, Created: time.Now().UTC()}
		s.imgs[id] = im
	}
	for _, t := range tags {
		for _, other := range s.imgs {
			if other != im {
				other.RepoTags = slices.DeleteFunc(other.RepoTags, func(x string) bool { return x == t })
			}
		}
		if !slices.Contains(im.RepoTags, t) {
			im.RepoTags = append(im.RepoTags, t)
		}
	}
	if err := s.saveLocked(); err != nil {
		return Image{}, err
	}
	return *im, nil
}

// ImportFile imports the module at path.
func (s *Store) ImportFile(ctx context.Context, path string, names ...string) (Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return Image{}, fmt.Errorf("images: open %s: %w", path, err)
	}
	defer f.Close()
	return s.Import(ctx, f, names...)
}

// Resolve finds the image a reference names: an id, a unique id prefix, a digest reference,
// or a (normalized) tag.
func (s *Store) Resolve(ref string) (Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	im := s.resolveLocked(ref)
	if im == nil {
		return Image{}, fmt.Errorf("image %q: %w", ref, ErrNotFound)
	}
	return *im, nil
}

func (s *Store) resolveLocked(ref string) *Image {
	ref = strings.TrimSpace(ref)
	if hexPart, ok := strings.CutPrefix(ref, "sha256:"); ok || isHex(ref) && len(ref) >= 12 {
		if !ok {
			hexPart = ref
		}
		var found *Image
		for id, im := range s.imgs {
			if strings.HasPrefix(id, "sha256:"+hexPart) {
				if found != nil {
					return nil // ambiguous
				}
				found = im
			}
		}
		if found != nil || ok {
			return found
		}
	}
	norm, err := Normalize(ref)
	if err != nil {
		return nil
	}
	if _, digest, ok := strings.Cut(norm, "@"); ok {
		return s.imgs[digest]
	}
	for _, im := range s.imgs {
		if slices.Contains(im.RepoTags, norm) {
			return im
		}
	}
	return nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

// List returns all images sorted by id.
func (s *Store) List() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	out := make([]Image, 0, len(s.imgs))
	for _, im := range s.imgs {
		c := *im
		c.RepoTags = slices.Clone(im.RepoTags)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Remove deletes the image ref names, with all its tags (as the CRI asks). Removing an
// image that is not there is not an error.
func (s *Store) Remove(ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return err
	}
	im := s.resolveLocked(ref)
	if im == nil {
		return nil
	}
	delete(s.imgs, im.ID)
	if err := s.saveLocked(); err != nil {
		return err
	}
	if err := os.Remove(s.BlobPath(im.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("images: remove blob: %w", err)
	}
	return nil
}

// Read returns the module bytes of image id.
func (s *Store) Read(id string) ([]byte, error) {
	b, err := os.ReadFile(s.BlobPath(id))
	if err != nil {
		return nil, fmt.Errorf("images: read %s: %w", id, err)
	}
	return b, nil
}

// Usage returns the bytes and files the blobs take.
func (s *Store) Usage() (bytes uint64, files uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	for _, im := range s.imgs {
		bytes += uint64(im.Size)
		files++
	}
	return bytes, files
}

// saveLocked rewrites index.json atomically (temp file, fsync, rename).
func (s *Store) saveLocked() error {
	idx := indexFile{Images: make([]*Image, 0, len(s.imgs))}
	for _, im := range s.imgs {
		idx.Images = append(idx.Images, im)
	}
	slices.SortFunc(idx.Images, func(a, b *Image) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("images: encode index: %w", err)
	}
	if err := WriteFileAtomic(s.indexPath(), b); err != nil {
		return err
	}
	if fi, err := os.Stat(s.indexPath()); err == nil {
		s.loadedMod, s.loadedSize = fi.ModTime(), fi.Size()
	}
	return nil
}

// WriteFileAtomic writes b to path through a synced temp file and a rename, so a crash
// leaves either the old or the new content.
func WriteFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}
