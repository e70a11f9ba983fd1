// Package objects reads the Kubernetes objects of admission requests (the Object and
// OldObject of an abi.AdmissionRequest) in a Go plugin. It decodes the members of
// abi.ObjectMeta and abi.Pod by hand, several times faster than encoding/json in a
// WebAssembly guest, and gives the same result as json.Unmarshal into those types: what
// it is not sure to read the same way is handed to encoding/json.
package objects

import (
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

// Meta decodes the metadata of an object (of any kind) as json.Unmarshal decodes it into
// struct{ Metadata abi.ObjectMeta `json:"metadata"` }.
func Meta(raw []byte) (abi.ObjectMeta, error) {
	var m abi.ObjectMeta
	err := guest.DecodeMeta(raw, &m)
	return m, err
}

// Pod decodes a Pod as json.Unmarshal decodes it into abi.Pod.
func Pod(raw []byte) (*abi.Pod, error) {
	p := new(abi.Pod)
	if err := guest.DecodePod(raw, p); err != nil {
		return nil, err
	}
	return p, nil
}
