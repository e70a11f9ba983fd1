// Package stats builds the kubelet's resource statistics from the CRI runtime's: the
// Summary served at /stats/summary and the Prometheus text served at /metrics/resource
// (what metrics-server and wasmplane's own API server scrape).
package stats

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// NodeUsage is the node's own CPU and memory, read by a NodeReader.
type NodeUsage struct {
	// Time is when the figures were read.
	Time time.Time
	// CPUNanoSeconds is the node's cumulative CPU time.
	CPUNanoSeconds uint64
	// WorkingSetBytes, UsageBytes and AvailableBytes are the node's memory.
	WorkingSetBytes, UsageBytes, AvailableBytes uint64
	// BootTime is when the node started.
	BootTime time.Time
}

// NodeReader reads the node's usage; ok is false where it cannot be read, and the node's
// figures are then the sum of its pods'.
type NodeReader func() (u NodeUsage, ok bool)

// Provider builds summaries from a CRI runtime. It keeps each container's previous CPU
// reading to give the summary's usageNanoCores, as the kubelet's CRI stats provider does.
type Provider struct {
	runtime  cri.RuntimeService
	nodeName string
	node     NodeReader

	mu   sync.Mutex
	prev map[string]cpuPoint // by container id, pod sandbox id, or "" for the node
}

type cpuPoint struct {
	at    time.Time
	total uint64
}

// NewProvider returns a Provider for the node nodeName; node nil = ReadNode.
func NewProvider(rt cri.RuntimeService, nodeName string, node NodeReader) *Provider {
	if node == nil {
		node = ReadNode
	}
	return &Provider{runtime: rt, nodeName: nodeName, node: node, prev: map[string]cpuPoint{}}
}

// Summary reads the runtime's stats of ready pod sandboxes and their running containers.
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	sandboxes, err := p.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("listing pod sandboxes: %w", err)
	}
	containers, err := p.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	podStats, err := p.runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("listing pod sandbox stats: %w", err)
	}
	return p.build(sandboxes, containers, podStats), nil
}

// build joins the runtime's lists into a Summary: pods of ready sandboxes, containers
// that are running (an exited container's figures are not the pod's any more).
func (p *Provider) build(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container, podStats []*runtimeapi.PodSandboxStats) *statsapi.Summary {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	ready := map[string]*runtimeapi.PodSandbox{}
	for _, sb := range sandboxes {
		ready[sb.Id] = sb
	}
	running := map[string]*runtimeapi.Container{}
	for _, c := range containers {
		running[c.Id] = c
	}
	out := &statsapi.Summary{Pods: []statsapi.PodStats{}}
	var podCPU, podMem uint64
	for _, ps := range podStats {
		sb := ready[ps.GetAttributes().GetId()]
		if sb == nil {
			continue
		}
		md := sb.GetMetadata()
		pod := statsapi.PodStats{
			PodRef:     statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime:  metav1.NewTime(time.Unix(0, sb.CreatedAt)),
			Containers: []statsapi.ContainerStats{},
		}
		for _, cs := range ps.GetLinux().GetContainers() {
			c := running[cs.GetAttributes().GetId()]
			if c == nil {
				continue
			}
			pod.Containers = append(pod.Containers, statsapi.ContainerStats{
				Name:      c.GetMetadata().GetName(),
				StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt)),
				CPU:       p.cpu(c.Id, cs.GetCpu(), seen),
				Memory:    memory(cs.GetMemory()),
			})
		}
		pod.CPU = p.cpu(sb.Id, ps.GetLinux().GetCpu(), seen)
		pod.Memory = memory(ps.GetLinux().GetMemory())
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			podCPU += *pod.CPU.UsageCoreNanoSeconds
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			podMem += *pod.Memory.WorkingSetBytes
		}
		out.Pods = append(out.Pods, pod)
	}
	out.Node = p.nodeStats(podCPU, podMem, seen)
	for id := range p.prev {
		if !seen[id] {
			delete(p.prev, id)
		}
	}
	return out
}

// nodeStats is the node's usage, or its pods' sums where the node cannot be read.
func (p *Provider) nodeStats(podCPU, podMem uint64, seen map[string]bool) statsapi.NodeStats {
	ns := statsapi.NodeStats{NodeName: p.nodeName}
	u, ok := p.node()
	if !ok {
		u = NodeUsage{Time: time.Now(), CPUNanoSeconds: podCPU, WorkingSetBytes: podMem, UsageBytes: podMem}
	}
	if !u.BootTime.IsZero() {
		ns.StartTime = metav1.NewTime(u.BootTime)
	}
	ns.CPU = p.cpu("", &runtimeapi.CpuUsage{Timestamp: u.Time.UnixNano(), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: u.CPUNanoSeconds}}, seen)
	ns.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(u.Time), WorkingSetBytes: &u.WorkingSetBytes, UsageBytes: &u.UsageBytes}
	if u.AvailableBytes > 0 {
		ns.Memory.AvailableBytes = &u.AvailableBytes
	}
	return ns
}

// cpu converts a CRI reading, with usageNanoCores from the previous reading of id.
func (p *Provider) cpu(id string, u *runtimeapi.CpuUsage, seen map[string]bool) *statsapi.CPUStats {
	if u == nil {
		return nil
	}
	at := time.Unix(0, u.Timestamp)
	out := &statsapi.CPUStats{Time: metav1.NewTime(at)}
	if u.UsageCoreNanoSeconds == nil {
		return out
	}
	total := u.UsageCoreNanoSeconds.Value
	out.UsageCoreNanoSeconds = &total
	seen[id] = true
	prev, ok := p.prev[id]
	if ok && at.After(prev.at) && total >= prev.total {
		rate := uint64(float64(total-prev.total) / at.Sub(prev.at).Seconds())
		out.UsageNanoCores = &rate
	}
	if !ok || at.After(prev.at) {
		p.prev[id] = cpuPoint{at: at, total: total}
	}
	return out
}

func memory(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	out := &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.Timestamp))}
	for _, f := range []struct {
		in  *runtimeapi.UInt64Value
		out **uint64
	}{{m.WorkingSetBytes, &out.WorkingSetBytes}, {m.UsageBytes, &out.UsageBytes}, {m.RssBytes, &out.RSSBytes},
		{m.AvailableBytes, &out.AvailableBytes}, {m.PageFaults, &out.PageFaults}, {m.MajorPageFaults, &out.MajorPageFaults}} {
		if f.in != nil {
			v := f.in.Value
			*f.out = &v
		}
	}
	return out
}
