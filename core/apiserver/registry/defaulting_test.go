package registry_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/storage"
	"github.com/wasmplane/wasmplane/core/storage/storagetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// countingStrategy counts Default calls.
type countingStrategy struct {
	registry.Strategy
	defaults atomic.Int32
}

func (s *countingStrategy) Default(obj runtime.Object) {
	s.defaults.Add(1)
	s.Strategy.Default(obj)
}

// labelling is a dynamic admission source whose one mutator sets a label, or does
// nothing.
type labelling struct{ change bool }

func (l labelling) Acquire(*admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	return []admission.Mutator{l}, nil, func() {}
}

func (l labelling) Name() string { return "labelling" }

func (l labelling) Admit(_ context.Context, a *admission.Attributes) error {
	if l.change {
		a.Object.(*corev1.ConfigMap).Labels = map[string]string{"set": "by-plugin"}
	}
	return nil
}

// TestCreateDefaultsOnlyWhatItMust: the store skips defaulting that would find nothing
// to do (the create handler defaulted the object already; mutating admission changed
// nothing of a resource only dynamic plugins change), and defaults again otherwise.
func TestCreateDefaultsOnlyWhatItMust(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := storagetest.Client(t)
	base := configMaps(t)
	for i, tc := range []struct {
		name               string
		onlyIfChanged      bool
		defaulted, noChain bool
		pluginChanges      bool
		wantDefaults       int32
	}{
		{name: "every resource by default", wantDefaults: 2},
		{name: "already defaulted by the caller", defaulted: true, wantDefaults: 1},
		{name: "only dynamic plugins change it, none did", onlyIfChanged: true, wantDefaults: 1},
		{name: "only dynamic plugins change it, one did", onlyIfChanged: true, pluginChanges: true, wantDefaults: 2},
		{name: "defaulted, unchanged", onlyIfChanged: true, defaulted: true, wantDefaults: 0},
		{name: "without an admission chain nothing is known", onlyIfChanged: true, noChain: true, wantDefaults: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := *base
			strategy := &countingStrategy{Strategy: base.Strategy}
			res.Strategy = strategy
			res.DefaultOnlyIfAdmissionChanged = tc.onlyIfChanged
			prefix := fmt.Sprintf("/registry/defaulting%d/configmaps", i)
			st := storage.NewEtcd(client, storage.ResourceConfig{GroupResource: res.GroupResource(), Prefix: prefix,
				NewFunc: res.NewFunc, NewListFunc: res.NewListFunc, Codec: storage.NewCodec(api.MustScheme())})
			store := registry.NewStore(&res, st, prefix)
			opts := registry.WriteOptions{Defaulted: tc.defaulted}
			if !tc.noChain {
				opts.Admission = &admission.Chain{Sources: []admission.Source{labelling{change: tc.pluginChanges}}}
			}
			out, err := store.Create(ctx, "ns", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := strategy.defaults.Load(); got != tc.wantDefaults {
				t.Errorf("Default ran %d times, want %d", got, tc.wantDefaults)
			}
			if got := out.(*corev1.ConfigMap).Labels["set"]; tc.pluginChanges && got != "by-plugin" {
				t.Errorf("the plugin's change was lost: labels %v", out.(*corev1.ConfigMap).Labels)
			}
		})
	}
}
