package scheduler

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// coreRecorder gives the framework's events.k8s.io-style recorder interface core/v1
// Events, which is what `kubectl describe pod` and `kubectl get events` read (as
// kube-scheduler did before the events.k8s.io API).
type coreRecorder struct{ r record.EventRecorder }

// Eventf implements events.EventRecorder; action and related have no core/v1 field.
func (c coreRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _ string, note string, args ...any) {
	c.r.Eventf(regarding, eventtype, reason, note, args...)
}
