package resources

import (
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// scaleFuncs is a scalable made of two functions.
type scaleFuncs struct {
	to  func(obj runtime.Object) (*autoscalingv1.Scale, error)
	set func(obj runtime.Object, n int32)
}

func (f scaleFuncs) toScale(obj runtime.Object) (*autoscalingv1.Scale, error) { return f.to(obj) }
func (f scaleFuncs) setReplicas(obj runtime.Object, n int32)                  { f.set(obj, n) }

// ScaleSubresource serves get, update and patch of autoscaling/v1 Scale for a resource
// whose objects toScale reads and setReplicas changes (custom resources).
func ScaleSubresource(s *endpoints.Scope, toScale func(obj runtime.Object) (*autoscalingv1.Scale, error), setReplicas func(obj runtime.Object, n int32)) endpoints.Subresource {
	return scaleSubresource(s, scaleFuncs{to: toScale, set: setReplicas})
}
