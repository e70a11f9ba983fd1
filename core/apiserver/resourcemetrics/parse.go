// Package resourcemetrics is the API server's resource metrics pipeline, what
// metrics-server does in its own process: it scrapes every Ready node's kubelet
// /metrics/resource, keeps each node's and container's last two cumulative readings, and
// computes the CPU rates and memory working sets that metrics.k8s.io/v1beta1 serves.
package resourcemetrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Point is one reading of a node or a container.
type Point struct {
	// Timestamp is when the CPU figure was read.
	Timestamp time.Time
	// StartTime is when a container started (zero for a node).
	StartTime time.Time
	// CPUNanoSeconds is the cumulative CPU time.
	CPUNanoSeconds uint64
	// MemoryBytes is the working set.
	MemoryBytes uint64
}

// ContainerKey names a container of a pod.
type ContainerKey struct {
	Namespace, Pod, Container string
}

// Batch is what one scrape of a kubelet read.
type Batch struct {
	// Node is the node's own reading; nil when the kubelet reported none.
	Node *Point
	// Containers are the readings of containers that reported both CPU and memory.
	Containers map[ContainerKey]Point
}

// sample is one parsed line.
type sample struct {
	name   string
	labels map[string]string
	value  float64
	at     time.Time // zero when the line has no timestamp
}

// ParseBatch reads a kubelet's /metrics/resource Prometheus text as metrics-server does:
// the node's and containers' CPU, memory and start time. Samples without a timestamp
// are taken as read at scraped. A node or container missing its CPU or its memory is
// left out; a container's timestamp is its CPU reading's.
func ParseBatch(r io.Reader, scraped time.Time) (*Batch, error) {
	b := &Batch{Containers: map[ContainerKey]Point{}}
	var node Point
	var nodeCPU, nodeMem bool
	type partial struct {
		p        Point
		cpu, mem bool
	}
	cs := map[ContainerKey]*partial{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s, ok, err := parseLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if !ok {
			continue
		}
		at := s.at
		if at.IsZero() {
			at = scraped
		}
		switch s.name {
		case "node_cpu_usage_seconds_total":
			node.CPUNanoSeconds, node.Timestamp, nodeCPU = nanos(s.value), at, true
		case "node_memory_working_set_bytes":
			node.MemoryBytes, nodeMem = uint64(max(s.value, 0)), true
		case "container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "container_start_time_seconds":
			k := ContainerKey{Namespace: s.labels["namespace"], Pod: s.labels["pod"], Container: s.labels["container"]}
			if k.Namespace == "" || k.Pod == "" || k.Container == "" {
				continue
			}
			c := cs[k]
			if c == nil {
				c = &partial{}
				cs[k] = c
			}
			switch s.name {
			case "container_cpu_usage_seconds_total":
				c.p.CPUNanoSeconds, c.p.Timestamp, c.cpu = nanos(s.value), at, true
			case "container_memory_working_set_bytes":
				c.p.MemoryBytes, c.mem = uint64(max(s.value, 0)), true
			default:
				sec, frac := math.Modf(s.value)
				c.p.StartTime = time.Unix(int64(sec), int64(frac*1e9))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	if nodeCPU && nodeMem {
		b.Node = &node
	}
	for k, c := range cs {
		if c.cpu && c.mem {
			b.Containers[k] = c.p
		}
	}
	return b, nil
}

// nanos converts core-seconds to nanoseconds.
func nanos(seconds float64) uint64 {
	if seconds <= 0 || math.IsNaN(seconds) {
		return 0
	}
	return uint64(math.Round(seconds * 1e9))
}

// parseLine parses one line of the Prometheus text format: `name{l="v",…} value [ms]`;
// ok is false for comments and blank lines.
func parseLine(l string) (s sample, ok bool, err error) {
	l = strings.TrimSpace(l)
	if l == "" || l[0] == '#' {
		return s, false, nil
	}
	i := strings.IndexAny(l, "{ \t")
	if i <= 0 {
		return s, false, fmt.Errorf("no value in %q", l)
	}
	s.name, l = l[:i], l[i:]
	if l[0] == '{' {
		s.labels = map[string]string{}
		if l, err = parseLabels(l[1:], s.labels); err != nil {
			return s, false, err
		}
	}
	f := strings.Fields(l)
	if len(f) < 1 || len(f) > 2 {
		return s, false, fmt.Errorf("want a value and an optional timestamp after %s, got %q", s.name, l)
	}
	if s.value, err = strconv.ParseFloat(f[0], 64); err != nil {
		return s, false, fmt.Errorf("value of %s: %w", s.name, err)
	}
	if len(f) == 2 {
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return s, false, fmt.Errorf("timestamp of %s: %w", s.name, err)
		}
		s.at = time.UnixMilli(ms)
	}
	return s, true, nil
}

// parseLabels reads `name="value",…}` into into and returns what follows the brace.
func parseLabels(l string, into map[string]string) (string, error) {
	for {
		l = strings.TrimLeft(l, " \t")
		if l == "" {
			return "", fmt.Errorf("unterminated label set")
		}
		if l[0] == '}' {
			return l[1:], nil
		}
		eq := strings.IndexByte(l, '=')
		if eq <= 0 || len(l) < eq+2 || l[eq+1] != '"' {
			return "", fmt.Errorf("malformed label in %q", l)
		}
		name := strings.TrimSpace(l[:eq])
		l = l[eq+2:]
		var v strings.Builder
		closed := false
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c == '\\' && i+1 < len(l) {
				i++
				switch l[i] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(l[i])
				}
				continue
			}
			if c == '"' {
				l, closed = l[i+1:], true
				break
			}
			v.WriteByte(c)
		}
		if !closed {
			return "", fmt.Errorf("unterminated value of label %s", name)
		}
		into[name] = v.String()
		l = strings.TrimLeft(l, " \t")
		if l != "" && l[0] == ',' {
			l = l[1:]
		}
	}
}
