package main

import (
	"context"
	"fmt"

	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	"k8s.io/client-go/kubernetes"
)

// requestCounts reads the API server's apiserver_request_total by verb (watches apart),
// so that a phase can report how many requests its controllers and nodes made: the same
// count whichever controllers run.
func requestCounts(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	series, err := scrape.Metric(ctx, cs, "apiserver_request_total")
	if err != nil {
		return nil, fmt.Errorf("counting API requests: %w", err)
	}
	out := map[string]float64{}
	for _, s := range series {
		out[s.Labels["verb"]] += s.Value
	}
	return out, nil
}

// requestFigures are the writes (POST, PUT, PATCH, DELETE) and reads (GET) made between
// two readings; the reading itself counts one GET.
func requestFigures(before, after map[string]float64) []figure {
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	var writes, reads float64
	for verb, n := range after {
		d := n - before[verb]
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE":
			writes += d
		case "GET":
			reads += d - 1
		}
	}
	return []figure{
		{name: "API write requests in the phase (POST, PUT, PATCH, DELETE)", value: writes, format: count},
		{name: "API GET requests in the phase (gets and lists)", value: reads, format: count},
	}
}
