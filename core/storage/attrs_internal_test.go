package storage

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// TestCompactFieldsMatchLikeSet: every field selector selects the same objects from the
// compact form as from the fields.Set it was made from, empty values included.
func TestCompactFieldsMatchLikeSet(t *testing.T) {
	set := fields.Set{"metadata.name": "web", "metadata.namespace": "a", "spec.nodeName": "", "status.phase": "Pending"}
	compact := newCompactFields(set)
	if len(compact) != 6 {
		t.Errorf("compact form has %d strings, want 6 (three non-empty pairs)", len(compact))
	}
	for _, sel := range []string{
		"metadata.name=web", "metadata.name!=web", "metadata.name=other",
		"spec.nodeName=", "spec.nodeName!=", "spec.nodeName=n1", "spec.nodeName!=n1",
		"status.phase=Pending,metadata.namespace=a", "status.phase=Pending,metadata.namespace=b",
		"status.podIP=", "status.podIP!=10.0.0.1",
	} {
		s, err := fields.ParseSelector(sel)
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		if got, want := s.Matches(compact), s.Matches(set); got != want {
			t.Errorf("%s: compact matches %v, the set %v", sel, got, want)
		}
	}
	if !compact.Has("status.phase") || compact.Has("spec.nodeName") || compact.Get("metadata.namespace") != "a" {
		t.Errorf("Has/Get: %v", compact)
	}
}
