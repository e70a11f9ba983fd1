// Package scrape reads series from the API server's /metrics (Prometheus text format) for
// tests that check what the server counts.
package scrape

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// MetricSample is one series of a metric in the Prometheus text format.
type MetricSample struct {
	Labels map[string]string
	Value  float64
}

// Metric reads the server's /metrics as cs's user and returns the series of the metric
// name.
func Metric(ctx context.Context, cs kubernetes.Interface, name string) ([]MetricSample, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	var out []MetricSample
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		s := MetricSample{Labels: map[string]string{}}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("metric line %q: no end of labels", line)
			}
			if s.Labels, err = parseLabels(rest[1:end]); err != nil {
				return nil, fmt.Errorf("metric line %q: %w", line, err)
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metric line %q: no value", line)
		}
		if s.Value, err = strconv.ParseFloat(f[0], 64); err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// MetricSum is the sum of the series of the metric name whose labels include want.
func MetricSum(ctx context.Context, cs kubernetes.Interface, name string, want map[string]string) (float64, error) {
	samples, err := Metric(ctx, cs, name)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, s := range samples {
		if includes(s.Labels, want) {
			sum += s.Value
		}
	}
	return sum, nil
}

func includes(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// parseLabels reads name="value" pairs separated by commas, values quoted with the
// Prometheus text format's escapes (\\, \", \n).
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), ",")) {
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return nil, fmt.Errorf("labels %q: want name=\"value\"", s)
		}
		var v strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					v.WriteByte('\n')
					continue
				}
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("labels %q: unterminated value", s)
		}
		out[strings.TrimSpace(name)] = v.String()
		s = rest[i+1:]
	}
	return out, nil
}
