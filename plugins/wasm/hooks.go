package wasm

import (
	"context"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

func (p *Plugin) jsonCall(ctx context.Context, hook string, req any, decode func([]byte) error) error {
	b, err := encodeJSON(req)
	if err != nil {
		return &Error{Plugin: p.label, Hook: hook, Kind: ErrBadInput, Err: err}
	}
	return p.invoke(ctx, hook, func(*instance) ([]byte, error) { return b, nil }, decode, nil)
}

// Authenticate calls the authenticate hook (ABI §7.2).
func (p *Plugin) Authenticate(ctx context.Context, req *abi.AuthenticateRequest) (*abi.AuthenticateResponse, error) {
	var resp *abi.AuthenticateResponse
	err := p.jsonCall(ctx, abi.HookAuthenticate, req, func(b []byte) (err error) {
		resp, err = decodeAuthenticate(b)
		return err
	})
	return resp, err
}

// Mutate calls the mutate hook (ABI §7.3).
func (p *Plugin) Mutate(ctx context.Context, req *abi.AdmissionRequest) (*abi.MutateResponse, error) {
	var resp *abi.MutateResponse
	err := p.jsonCall(ctx, abi.HookMutate, req, func(b []byte) (err error) {
		resp, err = decodeMutate(b)
		return err
	})
	return resp, err
}

// Validate calls the validate hook (ABI §7.3).
func (p *Plugin) Validate(ctx context.Context, req *abi.AdmissionRequest) (*abi.ValidateResponse, error) {
	var resp *abi.ValidateResponse
	err := p.jsonCall(ctx, abi.HookValidate, req, func(b []byte) (err error) {
		resp, err = decodeValidate(b)
		return err
	})
	return resp, err
}

// MutateJSON calls the mutate hook with a request already encoded as JSON (ABI §7.3), so
// that the admission adapter encodes a request once for all the plugins that see it.
func (p *Plugin) MutateJSON(ctx context.Context, req []byte) (*abi.MutateResponse, error) {
	var resp *abi.MutateResponse
	err := p.invoke(ctx, abi.HookMutate, func(*instance) ([]byte, error) { return req, nil }, func(b []byte) (err error) {
		if string(b) == allowedAnswer {
			resp = &abi.MutateResponse{Allowed: true}
			return nil
		}
		resp, err = decodeMutate(b)
		return err
	}, nil)
	return resp, err
}

// ObjectForm is how a validate request carries its object and oldObject, as the module
// that answers asked in configure (ABI §7.1, §7.3).
type ObjectForm uint8

const (
	// WholeObjects are the objects as a webhook gets them.
	WholeObjects ObjectForm = iota
	// CompactPods are Pods as the compact pod document of ABI §7.5, other kinds whole.
	CompactPods
	// ObjectMetadata is every object as its object metadata document (ABI §7.3,
	// AppendObjectMetadata).
	ObjectMetadata
)

// String names the form by the configure member that asks for it.
func (f ObjectForm) String() string {
	switch f {
	case CompactPods:
		return "compactPods"
	case ObjectMetadata:
		return "objectMetadata"
	}
	return "whole objects"
}

// objectForm is the form a module's configure answer asks for; the smaller wins.
func objectForm(f abi.ConfigureResponse) ObjectForm {
	switch {
	case f.ObjectMetadata:
		return ObjectMetadata
	case f.CompactPods:
		return CompactPods
	}
	return WholeObjects
}

// RequestForm is how the module that answers a validate request wants it written.
type RequestForm struct {
	// Objects is the form of the request's object and oldObject.
	Objects ObjectForm
	// Members, when not nil, are the only parts of the request the module reads (a
	// Rego build's record of its policy's reads, given with ObjectMetadata only, or
	// the reads a module declared in its configure answer): the request is written
	// with the members it keeps, in the request's order, each whole but object and
	// oldObject, of whose object metadata or compact pod documents only the members it
	// keeps are written (each of those whole, and of a compact pod's metadata and spec
	// too); objects in other forms are written whole.
	Members *Members
}

// requestForm is the form in which the instance's module wants a validate request.
func (in *instance) requestForm() RequestForm {
	f := RequestForm{Objects: objectForm(in.set.flags)}
	if in.opa == nil {
		f.Members = in.set.reads
	} else if f.Objects == ObjectMetadata {
		f.Members = in.opa.project
	}
	return f
}

// ValidateJSON calls the validate hook with the request build encodes as JSON, as
// MutateJSON does; build learns the form in which the module that will answer wants it
// (the objects as it asked for them, "compactPods" or "objectMetadata" of ABI §7.1, and
// for a recorded Rego policy the members it reads), which is known only once an
// instance is chosen: a swap may change the answer between two calls. build appends the
// request to dst and returns the result; dst is the instance's input buffer in guest
// memory, so a request that fits is written there once, with no copy on the Go heap
// between.
func (p *Plugin) ValidateJSON(ctx context.Context, build func(dst []byte, form RequestForm) ([]byte, error)) (*abi.ValidateResponse, error) {
	var resp *abi.ValidateResponse
	err := p.invoke(ctx, abi.HookValidate, func(in *instance) ([]byte, error) {
		form := in.requestForm()
		req, err := build(in.inputBuffer(), form)
		if err == nil {
			in.shaped = form.Members != nil
			in.keptInput(req)
		}
		return req, err
	}, func(b []byte) (err error) {
		if string(b) == allowedAnswer {
			resp = &abi.ValidateResponse{Allowed: true}
			return nil
		}
		resp, err = decodeValidate(b)
		return err
	}, nil)
	return resp, err
}

// allowedAnswer is the answer of most admission calls, in the exact form every SDK writes
// it; it is recognised without two passes of encoding/json.
const allowedAnswer = `{"allowed":true}`

// Initialize calls the initialize hook (ABI §7.4).
func (p *Plugin) Initialize(ctx context.Context, req *abi.InitializeRequest) (*abi.InitializeResponse, error) {
	var resp *abi.InitializeResponse
	err := p.jsonCall(ctx, abi.HookInitialize, req, func(b []byte) (err error) {
		resp, err = decodeInitialize(b)
		return err
	})
	return resp, err
}

// Filter calls the filter hook once for the pod and all its candidate nodes (ABI §7.5).
func (p *Plugin) Filter(ctx context.Context, in *SchedulingInput) (*abi.FilterResponse, error) {
	var resp *abi.FilterResponse
	err := p.invoke(ctx, abi.HookFilter,
		func(inst *instance) ([]byte, error) { return buildScheduling(inst, in) },
		func(b []byte) (err error) {
			resp, err = decodeFilter(b, len(in.Nodes))
			return err
		}, commitTable)
	return resp, err
}

// Score calls the score hook once for the pod and all its feasible nodes (ABI §7.5) and
// returns one score per node, in order.
func (p *Plugin) Score(ctx context.Context, in *SchedulingInput) ([]int64, error) {
	var scores []int64
	err := p.invoke(ctx, abi.HookScore,
		func(inst *instance) ([]byte, error) { return buildScheduling(inst, in) },
		func(b []byte) (err error) {
			scores, err = decodeScores(b, len(in.Nodes), make([]int64, 0, len(in.Nodes)))
			return err
		}, commitTable)
	return scores, err
}

func commitTable(in *instance) {
	if in.table != nil {
		in.table.commit()
	}
}
