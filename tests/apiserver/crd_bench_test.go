package apiserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// benchClients is how many clients create at once.
const benchClients = 32

// recordsCRD has a spec of 20 fields and 5 CEL rules.
func recordsCRD() *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := range 10 {
		props[fmt.Sprintf("s%d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptr.To[int64](64)}
		props[fmt.Sprintf("n%d", i)] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptr.To(0.0), Maximum: ptr.To(1000.0)}
	}
	rules := apiextensionsv1.ValidationRules{
		{Rule: "self.n0 <= self.n1", Message: "n0 must not exceed n1"},
		{Rule: "self.s0.startsWith('rec')", Message: "s0 must start with rec"},
		{Rule: "self.n2 + self.n3 < 2000", Message: "n2+n3 too large"},
		{Rule: "size(self.s1) > 0", Message: "s1 required"},
		{Rule: "self.n4 != 999", Message: "n4 reserved"},
	}
	c := simpleCRD("records", "Record", "bench.example.com", apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props, XValidations: rules})
	c.Spec.Scope = apiextensionsv1.NamespaceScoped
	return c
}

func record(i int) *unstructured.Unstructured {
	spec := map[string]any{}
	for f := range 10 {
		spec[fmt.Sprintf("s%d", f)] = fmt.Sprintf("rec-%d-%d", i, f)
		spec[fmt.Sprintf("n%d", f)] = int64(f)
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Record",
		"metadata": map[string]any{"name": fmt.Sprintf("r%d", i), "namespace": "default"}, "spec": spec}}
}

// BenchmarkCreates compares creates/s through HTTP of a custom object (20 fields, 5 CEL
// rules) and of a ConfigMap of the same size, by 32 clients on one server.
func BenchmarkCreates(b *testing.B) {
	srv := testserver.StartAPI(b)
	e := newCRDEnv(b, srv)
	cs := srv.Clientset(b, true)
	ctx := context.Background()
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, recordsCRD(), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	records := schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "records"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.dyn.Resource(records).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("records never served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	run := func(b *testing.B, create func(i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Value
		b.ResetTimer()
		start := time.Now()
		for range benchClients {
			wg.Go(func() {
				for {
					i := int(next.Add(1))
					if i > b.N {
						return
					}
					if err := create(i); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		if err, ok := failed.Load().(error); ok {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creates/s")
	}
	// Object names stay unique across the benchmark's repeated runs.
	offset := 0
	b.Run("ConfigMap", func(b *testing.B) {
		base := offset
		offset += b.N
		run(b, func(i int) error {
			data := map[string]string{}
			for f := range 20 {
				data[fmt.Sprintf("k%d", f)] = fmt.Sprintf("rec-%d-%d", i, f)
			}
			_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", base+i)}, Data: data}, metav1.CreateOptions{})
			return err
		})
	})
	b.Run("CustomObject-20fields-5CEL", func(b *testing.B) {
		base := offset
		offset += b.N
		run(b, func(i int) error {
			_, err := e.dyn.Resource(records).Namespace("default").Create(ctx, record(base+i), metav1.CreateOptions{})
			return err
		})
	})
}
