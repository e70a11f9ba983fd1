package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/trace"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// traceReport is the body of POST pods/NAME/trace (the API server's PodTraceReport; the
// scheduler reaches the API server only through client-go, so it spells it here).
type traceReport struct {
	UID  string     `json:"uid"`
	Step trace.Step `json:"step"`
}

// failureSummary is the Summary of a failed attempt: the profile, per Filter plugin how
// many nodes it rejected and why, and the message the FailedScheduling event carries.
func failureSummary(profile string, err error) *Summary {
	var fitErr *framework.FitError
	sum := &Summary{Profile: profile}
	if errors.As(err, &fitErr) {
		sum = newSummary(profile, fitErr.NumAllNodes, 0, fitErr.Diagnosis, nil, "")
	}
	sum.Message = err.Error()
	return sum
}

// reportAttempt adds a failed scheduling attempt to the pod's trace. A pod that is never
// bound has no Binding to carry the summary, so this is how `wasmplane trace pod` shows
// why it is pending. It costs one small request per failed attempt, kept in memory by the
// API server (never in etcd) and folded into one row while the outcome repeats. Best
// effort: a trace must never hold scheduling up, so failures are only logged.
func (s *Scheduler) reportAttempt(ctx context.Context, pod *v1.Pod, profile, result string, start time.Time, err error) {
	// A fake clientset (unit tests) has a nil REST client; a real one never does.
	if rc, ok := s.client.CoreV1().RESTClient().(*rest.RESTClient); !ok || rc == nil {
		return
	}
	detail, mErr := json.Marshal(failureSummary(profile, err))
	if mErr != nil {
		return
	}
	body, mErr := json.Marshal(traceReport{UID: string(pod.UID), Step: trace.Step{Time: start, Duration: time.Since(start),
		Component: "scheduler", Step: "schedule", Result: result, Detail: string(detail)}})
	if mErr != nil {
		return
	}
	res := s.client.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("trace").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx)
	if rErr := res.Error(); rErr != nil && ctx.Err() == nil {
		// A server without pods/trace (another API server) answers 404/405: not an error.
		s.log.Debug("reporting a scheduling attempt to the pod's trace", "pod", klogKey(pod), "err", rErr)
	}
}
