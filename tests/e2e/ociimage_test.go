package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// OCI media types and annotations of the image layout (image-spec v1).
const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar+gzip"
	ociRefName      = "org.opencontainers.image.ref.name"
	// containerdImageName is the annotation `ctr images import` names the image after.
	containerdImageName = "io.containerd.image.name"
)

// ociFile is one entry of an image's single layer: a regular file (Body), a symlink
// (Link) or, with neither, a directory.
type ociFile struct {
	Path string
	Mode int64
	Body []byte
	Link string
}

// ociImage describes a one-layer image for linux/GOARCH.
type ociImage struct {
	Name       string // full reference, e.g. docker.io/library/busybox:e2e
	Entrypoint []string
	Cmd        []string
	Env        []string
	Files      []ociFile
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// writeOCIArchive writes img as an OCI image layout in a tar file (oci-layout,
// index.json, blobs/sha256/…), the form `ctr images import` reads, built with the
// standard library only so that no registry is needed.
func writeOCIArchive(path string, img ociImage) error {
	layer, diffID, err := ociLayer(img.Files)
	if err != nil {
		return fmt.Errorf("building the layer of %s: %w", img.Name, err)
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "Env": img.Env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return fmt.Errorf("encoding the config of %s: %w", img.Name, err)
	}
	blobs := map[string][]byte{}
	desc := func(mediaType string, b []byte) ociDescriptor {
		d := digestOf(b)
		blobs[d] = b
		return ociDescriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     ociManifestType,
		"config":        desc(ociConfigType, config),
		"layers":        []ociDescriptor{desc(ociLayerType, layer)},
	})
	if err != nil {
		return fmt.Errorf("encoding the manifest of %s: %w", img.Name, err)
	}
	md := desc(ociManifestType, manifest)
	md.Platform = &ociPlatform{Architecture: runtime.GOARCH, OS: "linux"}
	md.Annotations = map[string]string{containerdImageName: img.Name, ociRefName: img.Name}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ociIndexType, "manifests": []ociDescriptor{md}})
	if err != nil {
		return fmt.Errorf("encoding the index of %s: %w", img.Name, err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := add("index.json", index); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	for d, b := range blobs {
		if err := add("blobs/sha256/"+d[len("sha256:"):], b); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ociLayer returns the gzip-compressed tar of files and the digest of the uncompressed
// tar (the config's diff_id).
func ociLayer(files []ociFile) (layer []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		h := &tar.Header{Name: f.Path, Mode: f.Mode, ModTime: time.Unix(0, 0)}
		switch {
		case f.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		case f.Body != nil:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Body))
		default:
			h.Typeflag = tar.TypeDir
		}
		if h.Mode == 0 {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Body); err != nil {
				return nil, "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), digestOf(raw.Bytes()), nil
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
