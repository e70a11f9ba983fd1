package apfbootstrap

import (
	"context"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes/fake"
)

// changed returns a copy of a bootstrap FlowSchema with another precedence, the given
// autoupdate annotation ("" = none) and generation.
func changed(fs *flowcontrolv1.FlowSchema, annotation string, generation int64) *flowcontrolv1.FlowSchema {
	c := fs.DeepCopy()
	c.Spec.MatchingPrecedence = 4242
	c.Annotations = map[string]string{}
	if annotation != "" {
		c.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = annotation
	}
	c.Generation = generation
	return c
}

// stored is a schema's precedence and autoupdate annotation after a pass; a negative
// precedence means the schema must be gone.
type stored struct {
	precedence int32
	annotation string
}

func TestEnsure(t *testing.T) {
	byUser := func(name, annotation string) *flowcontrolv1.FlowSchema {
		fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}},
			Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 500, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"}}}
		if annotation != "" {
			fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] = annotation
		}
		return fs
	}
	for _, tc := range []struct {
		name string
		seed []runtime.Object
		want map[string]stored
	}{
		{name: "empty: everything created", want: map[string]stored{"exempt": {1, "true"}, "catch-all": {10000, "true"}, "global-default": {9900, "true"}}},
		{name: "mandatory changed: restored", seed: []runtime.Object{changed(bootstrap.MandatoryFlowSchemaCatchAll, "false", 2)},
			want: map[string]stored{"catch-all": {10000, "true"}}},
		{name: "suggested, autoupdate true: restored", seed: []runtime.Object{changed(bootstrap.SuggestedFlowSchemaGlobalDefault, "true", 2)},
			want: map[string]stored{"global-default": {9900, "true"}}},
		{name: "suggested, autoupdate false: kept", seed: []runtime.Object{changed(bootstrap.SuggestedFlowSchemaGlobalDefault, "false", 2)},
			want: map[string]stored{"global-default": {4242, "false"}}},
		{name: "suggested, no annotation, changed since creation: kept, marked false", seed: []runtime.Object{changed(bootstrap.SuggestedFlowSchemaGlobalDefault, "", 2)},
			want: map[string]stored{"global-default": {4242, "false"}}},
		{name: "suggested, no annotation, never changed: restored, marked true", seed: []runtime.Object{changed(bootstrap.SuggestedFlowSchemaGlobalDefault, "", 1)},
			want: map[string]stored{"global-default": {9900, "true"}}},
		{name: "dropped from the bootstrap configuration: deleted; administrators' own: kept",
			seed: []runtime.Object{byUser("old-suggestion", "true"), byUser("mine", ""), byUser("pinned", "false")},
			want: map[string]stored{"old-suggestion": {-1, ""}, "mine": {500, ""}, "pinned": {500, "false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.seed...)
			e := &Ensurer{Client: cs.FlowcontrolV1()}
			ctx := context.Background()
			if err := e.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.want {
				fs, err := cs.FlowcontrolV1().FlowSchemas().Get(ctx, name, metav1.GetOptions{})
				if want.precedence < 0 {
					if !apierrors.IsNotFound(err) {
						t.Errorf("%s: got %v, want it deleted", name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if fs.Spec.MatchingPrecedence != want.precedence || fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey] != want.annotation {
					t.Errorf("%s: precedence %d annotation %q, want %d %q", name, fs.Spec.MatchingPrecedence,
						fs.Annotations[flowcontrolv1.AutoUpdateAnnotationKey], want.precedence, want.annotation)
				}
			}
			// Every bootstrap level exists after one pass.
			for _, pl := range append(bootstrap.MandatoryPriorityLevelConfigurations, bootstrap.SuggestedPriorityLevelConfigurations...) {
				if _, err := cs.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, pl.Name, metav1.GetOptions{}); err != nil {
					t.Errorf("level %s: %v", pl.Name, err)
				}
			}
		})
	}
}
