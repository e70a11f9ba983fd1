package wasm

import (
	"errors"
	"fmt"
)

// Kind classifies a failed load or call (ABI §4); each Kind is an error value, so
// errors.Is(err, wasm.ErrTimeout) tells what happened.
type Kind string

// Error implements error.
func (k Kind) Error() string { return "wasm: " + string(k) }

// The kinds of sdk/ABI.md §4.
const (
	ErrTrap           Kind = "trap"
	ErrTimeout        Kind = "timeout"
	ErrOutOfMemory    Kind = "out-of-memory"
	ErrInputTooLarge  Kind = "input-too-large"
	ErrBadInput       Kind = "bad-input"
	ErrOutputTooLarge Kind = "output-too-large"
	ErrBadOutput      Kind = "bad-output"
	ErrGuest          Kind = "guest"
	ErrNotImplemented Kind = "not-implemented"
	ErrABIVersion     Kind = "abi-version"
	ErrInvalidModule  Kind = "invalid-module"
	ErrConfigRejected Kind = "config-rejected"
	ErrClosed         Kind = "closed"
	// ErrSuspended fails a call of a module that kept running out of time or memory
	// (see RuntimeConfig.SuspendAfter); no guest code ran.
	ErrSuspended Kind = "suspended"
)

// Error is the error of one failed load or call of a plugin.
type Error struct {
	Plugin string
	Hook   string
	Kind   Kind
	Err    error
}

// Error implements error.
func (e *Error) Error() string {
	where := "wasm plugin " + e.Plugin
	if e.Hook != "" {
		where += " " + e.Hook
	}
	if e.Err == nil {
		return fmt.Sprintf("%s: %s", where, string(e.Kind))
	}
	return fmt.Sprintf("%s: %s: %v", where, string(e.Kind), e.Err)
}

// Unwrap exposes both the kind and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// KindOf returns the kind of err, or "" when err is nil or not a wasm error.
func KindOf(err error) Kind {
	if err == nil {
		// Every successful call asks; errors.As would allocate its targets first.
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	return ""
}

// discards tells whether a call failing with this kind must discard its instance.
func (k Kind) discards() bool {
	switch k {
	case ErrGuest, ErrInputTooLarge, ErrBadInput, ErrNotImplemented, ErrClosed, ErrSuspended:
		return false
	}
	return true
}
