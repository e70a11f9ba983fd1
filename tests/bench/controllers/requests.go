package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requestCounts reads the API server's apiserver_request_total by verb (watches apart),
// so that a phase can report how many requests its controllers and nodes made: the same
// count whichever controllers run.
func requestCounts(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		verb := ""
		for _, l := range strings.Split(labels, ",") {
			if v, ok := strings.CutPrefix(l, `verb="`); ok {
				verb = strings.TrimSuffix(v, `"`)
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || verb == "" {
			continue
		}
		out[verb] += n
	}
	return out, sc.Err()
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
