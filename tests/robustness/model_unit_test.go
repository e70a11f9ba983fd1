package robustness

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestObjectModel: the checker accepts the histories Kubernetes semantics allow and
// refuses the ones they forbid (a lost acknowledged write, a stale read, a precondition
// ignored, a revision going backwards), with unknown outcomes either way.
func TestObjectModel(t *testing.T) {
	type op struct {
		call, ret int64
		in        input
		out       output
	}
	create := func(call, ret int64, v string, rv int64) op {
		return op{call, ret, input{Kind: opCreate, Name: "a", Value: v}, output{Status: statusOK, RV: rv, Value: v}}
	}
	get := func(call, ret int64, v string, rv int64) op {
		return op{call, ret, input{Kind: opGet, Name: "a"}, output{Status: statusOK, RV: rv, Value: v}}
	}
	absent := func(call, ret int64) op {
		return op{call, ret, input{Kind: opGet, Name: "a"}, output{Status: statusNotFound}}
	}
	update := func(call, ret int64, v string, pre, rv int64) op {
		return op{call, ret, input{Kind: opUpdate, Name: "a", Value: v, RV: pre}, output{Status: statusOK, RV: rv, Value: v}}
	}
	unknown := func(call int64, in input) op {
		return op{call, pendingReturn, in, output{Status: statusUnknown}}
	}
	tests := []struct {
		name string
		ops  []op
		want bool
	}{
		{"create then read", []op{create(0, 1, "x", 5), get(2, 3, "x", 5)}, true},
		{"read before create is absent", []op{absent(0, 1), create(2, 3, "x", 5)}, true},
		{"lost acknowledged create", []op{create(0, 1, "x", 5), absent(2, 3)}, false},
		{"stale read after update", []op{create(0, 1, "x", 5), update(2, 3, "y", 5, 7), get(4, 5, "x", 5)}, false},
		{"concurrent read may see either", []op{create(0, 1, "x", 5), update(2, 6, "y", 5, 7), get(3, 4, "x", 5)}, true},
		{"update ignoring its precondition", []op{create(0, 1, "x", 5), update(2, 3, "y", 4, 7)}, false},
		{"revision going backwards", []op{create(0, 1, "x", 5), update(2, 3, "y", 5, 3)}, false},
		{"conflict on a matching precondition", []op{create(0, 1, "x", 5),
			{2, 3, input{Kind: opUpdate, Name: "a", Value: "y", RV: 5}, output{Status: statusConflict}}}, false},
		{"conflict on a stale precondition", []op{create(0, 1, "x", 5), update(2, 3, "y", 5, 7),
			{4, 5, input{Kind: opUpdate, Name: "a", Value: "z", RV: 5}, output{Status: statusConflict}}}, true},
		{"unknown create that happened", []op{unknown(0, input{Kind: opCreate, Name: "a", Value: "x"}), get(5, 6, "x", 9)}, true},
		{"unknown create that did not happen", []op{unknown(0, input{Kind: opCreate, Name: "a", Value: "x"}), absent(5, 6)}, true},
		{"unknown update then read its revision", []op{create(0, 1, "x", 5), unknown(2, input{Kind: opUpdate, Name: "a", Value: "y", RV: 5}),
			get(4, 5, "y", 8), update(6, 7, "z", 8, 9)}, true},
		{"unknown update cannot go back in revision", []op{create(0, 1, "x", 5), unknown(2, input{Kind: opUpdateNoRV, Name: "a", Value: "y"}),
			get(4, 5, "y", 4)}, false},
		{"value nobody wrote", []op{create(0, 1, "x", 5), get(2, 3, "w", 5)}, false},
		{"delete then recreate with a newer revision", []op{create(0, 1, "x", 5),
			{2, 3, input{Kind: opDelete, Name: "a"}, output{Status: statusOK}}, absent(4, 5), create(6, 7, "y", 9)}, true},
		{"recreate reusing an old revision", []op{create(0, 1, "x", 5),
			{2, 3, input{Kind: opDelete, Name: "a"}, output{Status: statusOK}}, create(6, 7, "y", 5)}, false},
		{"delete with a stale precondition succeeding", []op{create(0, 1, "x", 5), update(2, 3, "y", 5, 7),
			{4, 5, input{Kind: opDeleteRV, Name: "a", RV: 5}, output{Status: statusOK}}}, false},
		{"patch of an absent object", []op{{0, 1, input{Kind: opPatch, Name: "a", Value: "p"}, output{Status: statusOK, RV: 3, Value: "p"}}}, false},
		// A delete without precondition spanning another delete and a re-creation: it
		// removes the new object (or finds none), it never answers a conflict.
		{"delete spanning a delete and a re-creation", []op{create(0, 1, "x", 5),
			{2, 9, input{Kind: opDelete, Name: "a"}, output{Status: statusOK}},
			{3, 4, input{Kind: opDelete, Name: "a"}, output{Status: statusOK}},
			create(5, 6, "y", 8), absent(10, 11)}, true},
		{"delete without precondition answered conflict", []op{create(0, 1, "x", 5),
			{2, 9, input{Kind: opDelete, Name: "a"}, output{Status: statusConflict}},
			{3, 4, input{Kind: opDelete, Name: "a"}, output{Status: statusOK}},
			create(5, 6, "y", 8)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range tt.ops {
				history = append(history, porcupine.Operation{ClientId: i, Input: o.in, Call: o.call, Output: o.out, Return: o.ret})
			}
			if got := porcupine.CheckOperations(objectModel, history); got != tt.want {
				t.Fatalf("linearizable = %v, want %v", got, tt.want)
			}
		})
	}
}
