// Package defaultbinder is the DefaultBinder plugin: it binds through pods/binding.
package defaultbinder

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultBinder is the plugin.
type DefaultBinder struct{ h framework.Handle }

// New is the plugin factory.
func New(_ context.Context, _ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	return &DefaultBinder{h: h}, nil
}

// Name implements Plugin.
func (*DefaultBinder) Name() string { return names.DefaultBinder }

// Bind posts a Binding for the pod.
func (b *DefaultBinder) Bind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, node string) *framework.Status {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	if sum, ok := framework.EncodedSummary(state); ok {
		binding.Annotations = map[string]string{framework.TraceAnnotation: sum}
	}
	if err := b.h.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return framework.AsStatus(fmt.Errorf("binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, node, err))
	}
	return nil
}
