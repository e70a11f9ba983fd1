package stats

import (
	"io"
	"strconv"
	"strings"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// metric is one family of /metrics/resource: the kubelet's names, help and types
// (pkg/kubelet/metrics/collectors/resource_metrics.go), which metrics-server parses.
type metric struct {
	name, help, typ string
}

var (
	nodeCPU          = metric{"node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter"}
	nodeMemory       = metric{"node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge"}
	containerCPU     = metric{"container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter"}
	containerMemory  = metric{"container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge"}
	containerStart   = metric{"container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge"}
	podCPU           = metric{"pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter"}
	podMemory        = metric{"pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge"}
	resourceScrapErr = metric{"resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge"}
	scrapeErr        = metric{"scrape_error", "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise", "gauge"}
)

// sample is one line of a family.
type sample struct {
	labels [][2]string
	value  float64
	at     time.Time // zero: no timestamp
}

// WriteResourceMetrics writes s as the kubelet's /metrics/resource Prometheus text: the
// families in name order, each sample with the time it was read (in milliseconds, as
// the kubelet's collector stamps them); with s nil (reading the runtime failed) only the
// scrape error gauges, set to 1.
func WriteResourceMetrics(w io.Writer, s *statsapi.Summary) error {
	fams := map[metric][]sample{}
	failed := 0.0
	if s == nil {
		failed = 1
	} else {
		addCPU := func(m metric, labels [][2]string, c *statsapi.CPUStats) {
			if c != nil && c.UsageCoreNanoSeconds != nil {
				fams[m] = append(fams[m], sample{labels, float64(*c.UsageCoreNanoSeconds) / 1e9, c.Time.Time})
			}
		}
		addMem := func(m metric, labels [][2]string, ms *statsapi.MemoryStats) {
			if ms != nil && ms.WorkingSetBytes != nil {
				fams[m] = append(fams[m], sample{labels, float64(*ms.WorkingSetBytes), ms.Time.Time})
			}
		}
		addCPU(nodeCPU, nil, s.Node.CPU)
		addMem(nodeMemory, nil, s.Node.Memory)
		for _, p := range s.Pods {
			pl := [][2]string{{"namespace", p.PodRef.Namespace}, {"pod", p.PodRef.Name}}
			addCPU(podCPU, pl, p.CPU)
			addMem(podMemory, pl, p.Memory)
			for _, c := range p.Containers {
				cl := [][2]string{{"container", c.Name}, {"namespace", p.PodRef.Namespace}, {"pod", p.PodRef.Name}}
				addCPU(containerCPU, cl, c.CPU)
				addMem(containerMemory, cl, c.Memory)
				if !c.StartTime.IsZero() {
					st := c.StartTime.Time
					fams[containerStart] = append(fams[containerStart], sample{cl, float64(st.Unix()) + float64(st.Nanosecond())/1e9, st})
				}
			}
		}
	}
	fams[resourceScrapErr] = []sample{{value: failed}}
	fams[scrapeErr] = []sample{{value: failed}}
	var b strings.Builder
	for _, m := range []metric{containerCPU, containerMemory, containerStart, nodeCPU, nodeMemory, podCPU, podMemory, resourceScrapErr, scrapeErr} {
		if len(fams[m]) == 0 {
			continue // as client_golang writes them: no family without samples
		}
		b.WriteString("# HELP " + m.name + " " + m.help + "\n# TYPE " + m.name + " " + m.typ + "\n")
		for _, smp := range fams[m] {
			b.WriteString(m.name)
			if len(smp.labels) > 0 {
				b.WriteByte('{')
				for i, l := range smp.labels {
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(l[0] + `="` + escapeLabel(l[1]) + `"`)
				}
				b.WriteByte('}')
			}
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(smp.value, 'g', -1, 64))
			if !smp.at.IsZero() {
				b.WriteByte(' ')
				b.WriteString(strconv.FormatInt(smp.at.UnixMilli(), 10))
			}
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeLabel escapes a label value as the text format requires.
func escapeLabel(v string) string {
	if !strings.ContainsAny(v, "\\\"\n") {
		return v
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
