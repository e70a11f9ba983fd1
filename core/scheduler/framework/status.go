// Package framework defines the scheduling framework of wasmplane: the extension points
// (QueueSort, PreFilter, Filter, PostFilter, PreScore, Score, Reserve, Permit, PreBind,
// Bind, PostBind), the per-cycle state, node infos and snapshots, and the runtime that
// runs a profile's plugins. Out-of-tree plugins (e.g. the WASM adapter) implement these
// interfaces and join a profile at run time through Framework.SetExtension.
package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of a plugin call.
type Code int

// Status codes, as in Kubernetes' scheduling framework.
const (
	// Success means the plugin ran and the pod may proceed.
	Success Code = iota
	// Error is an internal error; the pod is retried with backoff.
	Error
	// Unschedulable means the pod does not fit now but might after a cluster change
	// (and preemption may help).
	Unschedulable
	// UnschedulableAndUnresolvable means the pod does not fit and preemption cannot help.
	UnschedulableAndUnresolvable
	// Wait is returned by Permit plugins to hold a pod before binding.
	Wait
	// Skip means the plugin does not apply to this pod (its later hooks are skipped).
	Skip
)

// String is the Kubernetes spelling of the code.
func (c Code) String() string {
	switch c {
	case Success:
		return "Success"
	case Error:
		return "Error"
	case Unschedulable:
		return "Unschedulable"
	case UnschedulableAndUnresolvable:
		return "UnschedulableAndUnresolvable"
	case Wait:
		return "Wait"
	case Skip:
		return "Skip"
	}
	return "Unknown"
}

// Status is a plugin's answer: a code, human-readable reasons and an optional error.
// A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus builds a status with the given code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	s := &Status{code: code, reasons: reasons}
	if code == Error && len(reasons) > 0 {
		s.err = errors.New(strings.Join(reasons, ", "))
	}
	return s
}

// AsStatus wraps an error into an Error status (nil error → nil status).
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code; a nil status is Success.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether the status is Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsWait reports whether the status is Wait.
func (s *Status) IsWait() bool { return s.Code() == Wait }

// IsSkip reports whether the status is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the pod was found unschedulable (resolvable or not).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons are the human-readable reasons (each counted in the FailedScheduling message).
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	if s.err != nil && len(s.reasons) == 0 {
		return []string{s.err.Error()}
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string { return strings.Join(s.Reasons(), ", ") }

// Plugin is the name of the plugin that produced the status (set by the runtime).
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records which plugin produced the status and returns it.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

// Err returns the underlying error of an Error status, or a synthesized one for the
// other non-success codes (nil for Success).
func (s *Status) Err() error {
	if s.IsSuccess() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}
