package robustness

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// opKind is one kind of request the traffic sends about one object.
type opKind int

const (
	opCreate     opKind = iota
	opUpdate            // PUT with metadata.resourceVersion as precondition
	opUpdateNoRV        // PUT without resourceVersion (unconditional)
	opPatch             // JSON merge patch, no precondition
	opDelete            // DELETE without precondition
	opDeleteRV          // DELETE with preconditions.resourceVersion
	opGet               // consistent GET (or one object's entry in a consistent list)
)

var opNames = [...]string{"create", "update", "update-unconditional", "patch", "delete", "delete-rv", "get"}

func (k opKind) String() string { return opNames[k] }

// input is a request about one ConfigMap: Value is the unique value a write stores, RV the
// resourceVersion precondition (0 = none).
type input struct {
	Kind  opKind
	Name  string
	Value string
	RV    int64
}

// status is how a request ended, as far as the client knows.
type status int

const (
	statusOK status = iota
	statusNotFound
	statusConflict
	statusExists
	// statusUnknown: a timeout or a broken connection, the request may or may not have
	// taken effect (porcupine sees the operation as still pending at the end).
	statusUnknown
)

var statusNames = [...]string{"ok", "not-found", "conflict", "already-exists", "unknown"}

func (s status) String() string { return statusNames[s] }

// output is a request's result: RV and Value of the object a successful write or get
// returned.
type output struct {
	Status status
	RV     int64
	Value  string
}

// objectState is one ConfigMap as the model knows it. RV is its resourceVersion when
// Known; after a write whose outcome is unknown it is only a strict lower bound (the
// write, if it happened, got a newer revision nobody has seen yet). A deleted object keeps
// its last RV as a lower bound for the next creation's revision (etcd's revision only
// grows).
type objectState struct {
	Exists bool
	Value  string
	RV     int64
	Known  bool
}

// rvMatches says whether an object in s may have resourceVersion rv.
func (s objectState) rvMatches(rv int64) bool {
	if s.Known {
		return rv == s.RV
	}
	return rv > s.RV
}

// stepObject is the sequential specification of one Kubernetes object under the
// requests the traffic sends: it returns every state the object can be in after the
// request in, answered by out, from state s (none when that answer is impossible).
func stepObject(s objectState, in input, out output) []objectState {
	if out.Status == statusUnknown {
		// Either the request never took effect, or it did and nobody saw its revision.
		next := []objectState{s}
		if applied, ok := applyUnobserved(s, in); ok {
			next = append(next, applied)
		}
		return next
	}
	switch in.Kind {
	case opGet:
		switch {
		case out.Status == statusNotFound && !s.Exists:
			return []objectState{s}
		case out.Status == statusOK && s.Exists && out.Value == s.Value && s.rvMatches(out.RV):
			return []objectState{{Exists: true, Value: s.Value, RV: out.RV, Known: true}}
		}
	case opCreate:
		switch {
		case out.Status == statusExists && s.Exists:
			return []objectState{s}
		case out.Status == statusOK && !s.Exists && out.RV > s.RV:
			return []objectState{{Exists: true, Value: in.Value, RV: out.RV, Known: true}}
		}
	case opUpdate, opUpdateNoRV, opPatch:
		precondition := in.Kind == opUpdate
		switch {
		case out.Status == statusNotFound && !s.Exists:
			return []objectState{s}
		case out.Status == statusConflict && precondition && s.Exists && !(s.Known && in.RV == s.RV):
			return []objectState{s}
		case out.Status == statusOK && s.Exists && out.Value == in.Value:
			if precondition && !s.rvMatches(in.RV) {
				return nil
			}
			floor := s.RV
			if precondition {
				floor = in.RV
			}
			if out.RV > floor {
				return []objectState{{Exists: true, Value: in.Value, RV: out.RV, Known: true}}
			}
		}
	case opDelete, opDeleteRV:
		precondition := in.Kind == opDeleteRV
		switch {
		case out.Status == statusNotFound && !s.Exists:
			return []objectState{s}
		case out.Status == statusConflict && precondition && s.Exists && !(s.Known && in.RV == s.RV):
			return []objectState{s}
		case out.Status == statusOK && s.Exists && (!precondition || s.rvMatches(in.RV)):
			floor := s.RV
			if precondition && in.RV > floor {
				floor = in.RV
			}
			return []objectState{{RV: floor, Known: true}}
		}
	}
	return nil
}

// applyUnobserved is the state after in took effect with an answer nobody received.
func applyUnobserved(s objectState, in input) (objectState, bool) {
	switch in.Kind {
	case opCreate:
		if !s.Exists {
			return objectState{Exists: true, Value: in.Value, RV: s.RV}, true
		}
	case opUpdate:
		if s.Exists && s.rvMatches(in.RV) {
			return objectState{Exists: true, Value: in.Value, RV: in.RV}, true
		}
	case opUpdateNoRV, opPatch:
		if s.Exists {
			return objectState{Exists: true, Value: in.Value, RV: s.RV}, true
		}
	case opDelete:
		if s.Exists {
			return objectState{RV: s.RV, Known: true}, true
		}
	case opDeleteRV:
		if s.Exists && s.rvMatches(in.RV) {
			return objectState{RV: max(s.RV, in.RV), Known: true}, true
		}
	}
	return objectState{}, false
}

// objectModel checks each object's history on its own (a history is linearizable iff
// each object's is, objects being independent keys of etcd).
var objectModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byName := map[string][]porcupine.Operation{}
		var names []string
		for _, op := range history {
			n := op.Input.(input).Name
			if _, ok := byName[n]; !ok {
				names = append(names, n)
			}
			byName[n] = append(byName[n], op)
		}
		out := make([][]porcupine.Operation, 0, len(names))
		for _, n := range names {
			out = append(out, byName[n])
		}
		return out
	},
	Init: func() []any { return []any{objectState{Known: true}} },
	Step: func(state, in, out any) []any {
		var next []any
		for _, s := range stepObject(state.(objectState), in.(input), out.(output)) {
			next = append(next, s)
		}
		return next
	},
	Equal: func(a, b any) bool { return a.(objectState) == b.(objectState) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		pre := ""
		if i.RV != 0 {
			pre = fmt.Sprintf(" if rv=%d", i.RV)
		}
		return fmt.Sprintf("%s %s %q%s -> %s rv=%d %q", i.Kind, i.Name, i.Value, pre, o.Status, o.RV, o.Value)
	},
	DescribeState: func(state any) string {
		s := state.(objectState)
		if !s.Exists {
			return fmt.Sprintf("absent (rv>%d)", s.RV)
		}
		if s.Known {
			return fmt.Sprintf("%q rv=%d", s.Value, s.RV)
		}
		return fmt.Sprintf("%q rv>%d", s.Value, s.RV)
	},
}).ToModel()

// pendingReturn is the return time of an operation whose answer never came: it stays
// concurrent with everything after its call.
const pendingReturn = math.MaxInt64
