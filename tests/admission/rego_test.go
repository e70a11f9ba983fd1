package admission_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// regoV2 is the require-labels policy with another message: the swap's new version.
const regoV2 = `package k8srequiredlabels

import rego.v1

violation contains {"msg": msg} if {
	provided := {label | input.review.object.metadata.labels[label]}
	required := {label | label := input.parameters.labels[_]}
	missing := required - provided
	count(missing) > 0
	msg := sprintf("v2: missing labels %v", [missing])
}
`

// TestRegoAdmission runs Gatekeeper's k8srequiredlabels policy, compiled by OPA, as a
// validating WasmPlugin: a pod without the label is refused with the policy's message,
// one with it is admitted; then the plugin is swapped to a second version of the policy
// while pods are created without pause, and no create fails for anything but the policy.
func TestRegoAdmission(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const ns = "tenant-a"
	pods := e.cs.CoreV1().Pods(ns)
	e.apply(t, ns, "required-labels", e.push(t, wasmtest.Rego(t, "require-labels")), []wasmv1.Hook{wasmv1.HookValidate},
		`{"parameters":{"labels":["team"]}}`, wasmv1.Fail)
	_, err := pods.Create(ctx, pod("no-team", nil, "hello:1"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `you must provide labels: ["team"]`) || !strings.Contains(err.Error(), ns+"/required-labels") {
		t.Fatalf("got %v, want 403 from %s/required-labels naming the missing label", err, ns)
	}
	if _, err := pods.Create(ctx, pod("team", map[string]string{"team": "a"}, "hello:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Creates run on two goroutines while the module is replaced; every one must be
	// decided by v1 or v2, never fail otherwise.
	v2 := e.push(t, wasmtest.RegoSource(t, regoV2, ""))
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var admitted, refused atomic.Int64
	var sawV2 atomic.Bool
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				labels := map[string]string{"team": "a"}
				if i%2 == 1 {
					labels = nil
				}
				_, err := pods.Create(ctx, pod(fmt.Sprintf("load-%d-%d", w, i), labels, "hello:1"), metav1.CreateOptions{})
				switch {
				case err == nil && labels != nil:
					admitted.Add(1)
				case apierrors.IsForbidden(err) && labels == nil && strings.Contains(err.Error(), "v2: missing labels"):
					sawV2.Store(true)
					refused.Add(1)
				case apierrors.IsForbidden(err) && labels == nil && strings.Contains(err.Error(), "you must provide labels"):
					refused.Add(1)
				default:
					errs <- fmt.Errorf("create %d (labels %v): %v", i, labels, err)
					return
				}
			}
		})
	}
	e.apply(t, ns, "required-labels", v2, []wasmv1.Hook{wasmv1.HookValidate}, `{"parameters":{"labels":["team"]}}`, wasmv1.Fail)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return sawV2.Load() || len(errs) > 0, nil
	})
	stop()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err != nil {
		t.Fatalf("the swapped policy never answered: %v", err)
	}
	t.Logf("during the swap: %d admitted, %d refused by the policy, none failed otherwise", admitted.Load(), refused.Load())
}
