package framework_test

import (
	"testing"

	"github.com/wasmplane/wasmplane/core/scheduler/internal/st"
)

// TestNodeInfoDerived: a value stored for an owner is read back by that owner only,
// survives Clone, and is dropped when the NodeInfo gets a new node object.
func TestNodeInfoDerived(t *testing.T) {
	ownerA, ownerB := new(int), new(int)
	ni := st.NodeInfo(st.Node("a", st.Res("cpu", "1")))
	if ni.Derived(ownerA) != nil {
		t.Fatal("a fresh NodeInfo has a derived value")
	}
	ni.StoreDerived(ownerA, "doc-1")
	steps := []struct {
		name  string
		owner any
		want  any
	}{
		{"same owner", ownerA, "doc-1"},
		{"other owner", ownerB, nil},
		{"nil owner", nil, nil},
	}
	for _, s := range steps {
		if got := ni.Derived(s.owner); got != s.want {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	clone := ni.Clone()
	if got := clone.Derived(ownerA); got != "doc-1" {
		t.Errorf("clone: %v, want doc-1", got)
	}
	changed := ni.Node().DeepCopy()
	changed.ResourceVersion = "2"
	clone.SetNode(changed)
	if got := clone.Derived(ownerA); got != nil {
		t.Errorf("after a new node object: %v, want nil", got)
	}
	if got := ni.Derived(ownerA); got != "doc-1" {
		t.Errorf("the original lost its value when the clone changed: %v", got)
	}
	ni.StoreDerived(ownerB, "doc-b")
	if ni.Derived(ownerA) != nil || ni.Derived(ownerB) != "doc-b" {
		t.Error("another owner's value did not replace the first")
	}
}
