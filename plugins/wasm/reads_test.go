package wasm

import (
	"strings"
	"testing"
)

func TestDeclaredReads(t *testing.T) {
	tests := []struct {
		name    string
		paths   []string
		keeps   [][]string // paths the members keep
		drops   []string   // request members they leave out
		wantErr string
	}{
		{name: "none: the whole request", paths: nil},
		{name: "labels and images", paths: []string{"operation", "kind", "object.metadata.labels", "object.spec.containers"},
			keeps: [][]string{{"operation"}, {"kind"}, {"object", "metadata", "labels"}, {"object", "spec", "containers"}},
			drops: []string{"uid", "resource", "userInfo", "oldObject", "name", "namespace", "dryRun"}},
		{name: "a member and one below it", paths: []string{"object.metadata", "object.metadata.name"},
			keeps: [][]string{{"object", "metadata"}, {"object", "metadata", "annotations"}}, drops: []string{"operation"}},
		{name: "empty name", paths: []string{"object..labels"}, wantErr: `reads[0] "object..labels": a path is member names joined by dots`},
		{name: "empty path", paths: []string{"operation", ""}, wantErr: `reads[1] ""`},
		{name: "not a request member", paths: []string{"metadata.labels"}, wantErr: `"metadata" is not a member of a validate request`},
		{name: "misspelt", paths: []string{"objects.metadata"}, wantErr: `"objects" is not a member`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := declaredReads(tt.paths)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.paths) == 0 {
				if m != nil {
					t.Fatalf("no paths gave %+v, want nil (the whole request)", m)
				}
				return
			}
			checkKeeps(t, m, tt.keeps, tt.drops)
		})
	}
}

// checkKeeps checks that m keeps something at each of paths and nothing of the request
// members drops.
func checkKeeps(t *testing.T, m *Members, paths [][]string, drops []string) {
	t.Helper()
	for _, path := range paths {
		node, ok := m, true
		for _, k := range path {
			if node, ok = node.Member(k); !ok {
				t.Fatalf("%v not kept", path)
			}
		}
	}
	for _, k := range drops {
		if m.Keeps(k) {
			t.Errorf("%s kept", k)
		}
	}
}
