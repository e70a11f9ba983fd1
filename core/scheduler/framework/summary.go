package framework

import "encoding/json"

// TraceAnnotation carries a scheduling summary on the Binding; the API server moves it
// into the pod's trace instead of storing it on the pod.
const TraceAnnotation = "trace.wasmplane.io/scheduling"

// SummaryKey keeps the cycle's scheduling summary in its CycleState until the binder
// ships it.
const SummaryKey StateKey = "wasmplane/scheduling-summary"

// EncodedSummary returns the summary the cycle recorded as JSON, if any.
func EncodedSummary(state *CycleState) (string, bool) {
	d, err := state.Read(SummaryKey)
	if err != nil {
		return "", false
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", false
	}
	return string(b), true
}
