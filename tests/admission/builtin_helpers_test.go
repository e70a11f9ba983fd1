package admission_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var nsCounter atomic.Int64

// builtinNamespace creates a fresh namespace for one test.
func builtinNamespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	name := fmt.Sprintf("builtin-%d-%d", time.Now().UnixNano()%100000, nsCounter.Add(1))
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return name
}

// simplePod is a pod no node selects, so that it stays put (and keeps its quota) while
// a whole plane runs.
func simplePod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"wasmplane.test/nowhere": "true"},
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
}

// wantStatus asserts err is a Kubernetes status error with code and a message containing msg.
func wantStatus(t testing.TB, err error, code int32, msg string) {
	t.Helper()
	var se apierrors.APIStatus
	if err == nil {
		t.Fatalf("expected HTTP %d %q, got success", code, msg)
	}
	if !asStatus(err, &se) || se.Status().Code != code || !strings.Contains(se.Status().Message, msg) {
		t.Fatalf("expected HTTP %d containing %q, got %v", code, msg, err)
	}
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*out = s
	}
	return ok
}
