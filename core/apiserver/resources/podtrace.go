package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/authn"
	"github.com/wasmplane/wasmplane/core/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TraceSchedulingAnnotation carries the scheduler's summary on a Binding (the scheduler
// spells it framework.TraceAnnotation; the API server cannot import the scheduler).
const TraceSchedulingAnnotation = "trace.wasmplane.io/scheduling"

// PodTrace is what pods/trace answers: one pod's journey through the flow.
type PodTrace struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        PodTraceMeta `json:"metadata"`
	// Recorded is false when this API server did not see the pod's creation (another
	// server did, or the record was evicted from the ring); steps then come only from the
	// pod's status.
	Recorded bool         `json:"recorded"`
	Steps    []trace.Step `json:"steps"`
}

// PodTraceMeta names the pod.
type PodTraceMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

// PodTraceReport is what a component POSTs to pods/NAME/trace: a step of the pod's journey
// that leaves no object behind — the scheduler's failed attempts — kept only in this API
// server's trace ring (never in etcd), repeats folded into one row (trace.Store.Fold).
type PodTraceReport struct {
	// UID of the pod the step belongs to: a report about an older pod of the same name is
	// dropped, and the server need not read the pod.
	UID  string     `json:"uid"`
	Step trace.Step `json:"step"`
}

// maxTraceReportBytes bounds a report: a summary, not per-node rows.
const maxTraceReportBytes = 64 << 10

// traceReportHandler serves POST pods/{name}/trace (202 Accepted: a trace is best effort,
// a pod this server did not see created has no record to add to).
func traceReportHandler(s *endpoints.Scope) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.CustomCode(w, req, func(ctx context.Context, _ func(runtime.Object) error, raw func(int64) ([]byte, error)) (runtime.Object, int, error) {
			data, err := raw(maxTraceReportBytes)
			if err != nil {
				return nil, 0, err
			}
			var rep PodTraceReport
			if err := json.Unmarshal(data, &rep); err != nil {
				return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("decoding the trace report: %v", err))
			}
			if rep.UID == "" || rep.Step.Component == "" || rep.Step.Step == "" {
				return nil, 0, apierrors.NewBadRequest("a trace report needs uid, step.component and step.step")
			}
			if s.Store.Traces != nil {
				// The server's clock orders the steps: the reporter's may differ.
				st := rep.Step
				st.Time, st.Count, st.Last = time.Now().Add(-st.Duration), 0, time.Time{}
				s.Store.Traces.Fold(s.Store.TraceKey(r.Namespace, r.Name), rep.UID, st)
			}
			return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusAccepted}, http.StatusAccepted, nil
		})
	}
}

// traceBinding records the binding and the scheduler's summary in the pod's trace.
func traceBinding(ctx context.Context, st *registry.Store, r endpoints.Request, b *corev1.Binding, bound runtime.Object, summary string, hasSummary bool, start time.Time) {
	if st.Traces == nil {
		return
	}
	pod, ok := bound.(*corev1.Pod)
	if !ok {
		return
	}
	var steps []trace.Step
	if hasSummary {
		steps = append(steps, trace.Step{Time: start, Component: "scheduler", Step: "schedule", Result: "node " + b.Target.Name, Detail: summary})
	}
	by := ""
	if u, ok := authn.UserFrom(ctx); ok {
		by = "by " + u.Name
	}
	steps = append(steps, trace.Step{Time: start, Duration: time.Since(start), Component: "binding", Step: "pods/binding", Result: "bound to " + b.Target.Name, Detail: by})
	st.Traces.Append(st.TraceKey(r.Namespace, r.Name), string(pod.UID), steps...)
}

// traceHandler serves GET pods/{name}/trace.
func traceHandler(s *endpoints.Scope) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		obj, err := s.Store.Get(req.Context(), r.Namespace, r.Name, &metav1.GetOptions{})
		if err != nil {
			s.Codecs.WriteError(w, req, err)
			return
		}
		pod := obj.(*corev1.Pod)
		out := PodTrace{TypeMeta: metav1.TypeMeta{APIVersion: "wasmplane.io/v1alpha1", Kind: "PodTrace"},
			Metadata: PodTraceMeta{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}}
		if s.Store.Traces != nil {
			if rec, ok := s.Store.Traces.Get(s.Store.TraceKey(r.Namespace, r.Name)); ok && rec.UID == string(pod.UID) {
				out.Recorded, out.Steps = true, rec.Steps
			}
		}
		out.Steps = trace.Merge(out.Steps, kubeletSteps(pod), nodeFloor(out.Steps))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// nodeFloor is the earliest a node's step can have happened: the end of the binding, or
// of the create when the pod was made with its node set.
func nodeFloor(recorded []trace.Step) time.Time {
	var floor time.Time
	for _, s := range recorded {
		if (s.Component == "binding" || s.Component == "storage") && s.End().After(floor) {
			floor = s.End()
		}
	}
	return floor
}

// kubeletSteps reads the node's part of the journey from the pod's status: the sandbox,
// each init container and container, readiness.
func kubeletSteps(pod *corev1.Pod) []trace.Step {
	var steps []trace.Step
	node := "kubelet"
	if pod.Spec.NodeName != "" {
		node = "kubelet/" + pod.Spec.NodeName
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodReadyToStartContainers:
			steps = append(steps, trace.Step{Time: c.LastTransitionTime.Time, Component: node, Step: "sandbox", Result: "ready"})
		case corev1.PodInitialized:
			steps = append(steps, trace.Step{Time: c.LastTransitionTime.Time, Component: node, Step: "init containers", Result: "done"})
		case corev1.PodReady:
			steps = append(steps, trace.Step{Time: c.LastTransitionTime.Time, Component: node, Step: "pod", Result: "Ready"})
		}
	}
	add := func(kind string, statuses []corev1.ContainerStatus) {
		for _, cs := range statuses {
			name := kind + " " + cs.Name
			if r := cs.State.Running; r != nil {
				steps = append(steps, trace.Step{Time: r.StartedAt.Time, Component: node, Step: name, Result: "running",
					Detail: fmt.Sprintf("image %s, restarts %d", cs.Image, cs.RestartCount)})
			}
			if t := cs.State.Terminated; t != nil {
				steps = append(steps, trace.Step{Time: t.StartedAt.Time, Duration: t.FinishedAt.Sub(t.StartedAt.Time), Component: node, Step: name,
					Result: fmt.Sprintf("%s (exit %d)", t.Reason, t.ExitCode), Detail: fmt.Sprintf("image %s, restarts %d", cs.Image, cs.RestartCount)})
			}
			if wt := cs.State.Waiting; wt != nil && wt.Reason != "" {
				steps = append(steps, trace.Step{Time: time.Now(), Component: node, Step: name, Result: "waiting: " + wt.Reason, Detail: wt.Message})
			}
		}
	}
	add("init container", pod.Status.InitContainerStatuses)
	add("container", pod.Status.ContainerStatuses)
	return steps
}
