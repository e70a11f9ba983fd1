// Command owner-annotator is a wasmplane mutate plugin: it copies an owner label (e.g.
// "team") into an annotation, warns the client when the label is missing, and records
// the owner as an audit annotation. It is idempotent, so it is safe to reinvoke: run
// again after a later plugin added the label, it sets the annotation then.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/mutate"
	"github.com/wasmplane/wasmplane/sdk/go/objects"
	"github.com/wasmplane/wasmplane/sdk/go/wasmplane"
)

type config struct {
	Label      string `json:"label"`
	Annotation string `json:"annotation"`
}

var cfg config

func init() {
	wasmplane.RegisterConfigure(func(req *abi.ConfigureRequest) error {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return err
		}
		if cfg.Label == "" || cfg.Annotation == "" {
			return errors.New(`config needs "label" and "annotation"`)
		}
		return nil
	})
	mutate.Register(func(req *abi.AdmissionRequest) (abi.MutateResponse, error) {
		if req.Operation != "CREATE" && req.Operation != "UPDATE" {
			return abi.MutateResponse{Allowed: true}, nil
		}
		// objects.Meta reads the metadata several times faster than encoding/json does
		// in a WebAssembly guest, with the same result.
		meta, err := objects.Meta(req.Object)
		if err != nil {
			return abi.MutateResponse{}, err
		}
		owner, ok := meta.Labels[cfg.Label]
		if !ok || owner == "" {
			return abi.MutateResponse{Allowed: true, Warnings: []string{
				fmt.Sprintf("%s %q has no %q label: annotation %s not set", strings.ToLower(req.Kind.Kind), req.Name, cfg.Label, cfg.Annotation)}}, nil
		}
		resp := abi.MutateResponse{Allowed: true, AuditAnnotations: map[string]string{"owner": owner}}
		if meta.Annotations[cfg.Annotation] == owner {
			return resp, nil
		}
		add := func(path string, v any) {
			b, _ := json.Marshal(v)
			resp.Patch = append(resp.Patch, abi.PatchOperation{Op: "add", Path: path, Value: b})
		}
		if meta.Annotations == nil {
			add("/metadata/annotations", map[string]string{})
		}
		add("/metadata/annotations/"+escape(cfg.Annotation), owner)
		return resp, nil
	})
}

// escape encodes a JSON Pointer reference token (RFC 6901).
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func main() {}
