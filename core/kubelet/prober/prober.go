// Package prober runs startup, liveness and readiness probes (exec through CRI ExecSync,
// httpGet and tcpSocket against the pod IP) with Kubernetes' timing and thresholds, and
// keeps the results the kubelet acts on.
package prober

import (
	"context"
	"crypto/tls"
	"fmt"
	"github.com/wasmplane/wasmplane/core/kubelet/kuberuntime"
	"k8s.io/client-go/tools/record"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cri "k8s.io/cri-api/pkg/apis"
)

// Type is a probe's kind.
type Type string

// The probe kinds.
const (
	Liveness  Type = "liveness"
	Readiness Type = "readiness"
	Startup   Type = "startup"
)

// StatusFunc returns the pod's last computed status (container ids, states, pod IP).
type StatusFunc func(uid types.UID) (corev1.PodStatus, bool)

// Manager owns one worker per probed container and probe type.
type Manager struct {
	runtime  cri.RuntimeService
	statusOf StatusFunc
	onChange func(uid types.UID)
	log      *slog.Logger
	ctx      context.Context
	wg       sync.WaitGroup
	recorder record.EventRecorder

	mu      sync.Mutex
	workers map[workerKey]context.CancelFunc
	results map[resultKey]bool
}

type workerKey struct {
	uid       types.UID
	container string
	typ       Type
}

type resultKey struct {
	containerID string
	typ         Type
}

// NewManager returns a manager whose workers live until ctx ends; onChange is told when a
// result flips so the pod is synced again.
func NewManager(ctx context.Context, runtime cri.RuntimeService, statusOf StatusFunc, onChange func(types.UID), log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{runtime: runtime, statusOf: statusOf, onChange: onChange, log: log, ctx: ctx,
		workers: map[workerKey]context.CancelFunc{}, results: map[resultKey]bool{}}
}

// SetRecorder makes the manager record an Unhealthy event at every failed probe, as
// Kubernetes' kubelet does; the kubelet sets it before any pod is added.
func (m *Manager) SetRecorder(r record.EventRecorder) { m.recorder = r }

// Wait blocks until every worker has stopped (after the manager's context ends).
func (m *Manager) Wait() { m.wg.Wait() }

// AddPod starts workers for the pod's probes that have none yet.
func (m *Manager) AddPod(pod *corev1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for typ, p := range map[Type]*corev1.Probe{Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe, Startup: c.StartupProbe} {
			if p == nil {
				continue
			}
			k := workerKey{pod.UID, c.Name, typ}
			if _, ok := m.workers[k]; ok {
				continue
			}
			ctx, cancel := context.WithCancel(m.ctx)
			m.workers[k] = cancel
			w := &worker{m: m, uid: pod.UID, pod: pod.DeepCopy(), container: c.DeepCopy(), typ: typ, probe: p.DeepCopy()}
			m.wg.Go(func() { w.run(ctx) })
		}
	}
}

// RemovePod stops a pod's workers and forgets their results.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, cancel := range m.workers {
		if k.uid == uid {
			cancel()
			delete(m.workers, k)
		}
	}
}

// result reads a probe result for a container instance.
func (m *Manager) result(containerID string, typ Type) (bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.results[resultKey{containerID, typ}]
	return v, ok
}

func (m *Manager) set(uid types.UID, containerID string, typ Type, v bool) {
	m.mu.Lock()
	old, ok := m.results[resultKey{containerID, typ}]
	m.results[resultKey{containerID, typ}] = v
	m.mu.Unlock()
	if (!ok || old != v) && m.onChange != nil {
		m.onChange(uid)
	}
}

func (m *Manager) drop(containerID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range []Type{Liveness, Readiness, Startup} {
		delete(m.results, resultKey{containerID, t})
	}
}

// Ready is a container instance's readiness result (known=false before the first one).
func (m *Manager) Ready(containerID string) (bool, bool) { return m.result(containerID, Readiness) }

// Started is a container instance's startup result.
func (m *Manager) Started(containerID string) (bool, bool) { return m.result(containerID, Startup) }

// Unhealthy reports whether a container instance failed its liveness or startup probe.
func (m *Manager) Unhealthy(containerID string) (bool, string) {
	if v, ok := m.result(containerID, Liveness); ok && !v {
		return true, string(Liveness)
	}
	if v, ok := m.result(containerID, Startup); ok && !v {
		return true, string(Startup)
	}
	return false, ""
}

type worker struct {
	m         *Manager
	uid       types.UID
	pod       *corev1.Pod
	container *corev1.Container
	typ       Type
	probe     *corev1.Probe

	containerID string
	lastResult  bool
	count       int
	onHold      bool
	startedAt   time.Time
}

func (w *worker) run(ctx context.Context) {
	period := time.Duration(max(w.probe.PeriodSeconds, 1)) * time.Second
	t := time.NewTicker(period)
	defer t.Stop()
	defer func() {
		if w.containerID != "" {
			w.m.drop(w.containerID)
		}
	}()
	// Poll the status more often than the period until the container starts, so that
	// the initial delay counts from its real start.
	fast := time.NewTicker(min(period, 200*time.Millisecond))
	defer fast.Stop()
	for {
		probed := w.step(ctx)
		var tick <-chan time.Time = t.C
		if !probed {
			tick = fast.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// step probes once if due; it reports whether the container was running and probed
// (or deliberately skipped), so that the worker falls back to the probe period.
func (w *worker) step(ctx context.Context) bool {
	st, ok := w.m.statusOf(w.uid)
	if !ok {
		return false
	}
	var cs *corev1.ContainerStatus
	for i := range st.ContainerStatuses {
		if st.ContainerStatuses[i].Name == w.container.Name {
			cs = &st.ContainerStatuses[i]
		}
	}
	if cs == nil || cs.State.Running == nil || cs.ContainerID == "" {
		return false
	}
	// Results are keyed by the runtime's id, without the "wasi://" the API shows.
	id := rawID(cs.ContainerID)
	if id != w.containerID {
		if w.containerID != "" {
			w.m.drop(w.containerID)
		}
		w.containerID, w.count, w.onHold = id, 0, false
		w.startedAt = cs.State.Running.StartedAt.Time
		switch w.typ {
		case Readiness:
			w.lastResult = false
			w.m.set(w.uid, id, w.typ, false)
		case Liveness:
			w.lastResult = true
			w.m.set(w.uid, id, w.typ, true)
		case Startup:
			w.lastResult = false
		}
	}
	if w.onHold {
		return true
	}
	if w.typ != Startup && w.container.StartupProbe != nil && (cs.Started == nil || !*cs.Started) {
		// Liveness and readiness wait for the startup probe.
		return true
	}
	if time.Since(w.startedAt) < time.Duration(w.probe.InitialDelaySeconds)*time.Second {
		return false
	}
	ok, msg := w.runProbe(ctx, st.PodIP, id)
	if ctx.Err() != nil {
		return true
	}
	if !ok && w.m.recorder != nil {
		typ := kuberuntime.ContainerTypeRegular
		for _, c := range w.pod.Spec.InitContainers {
			if c.Name == w.container.Name {
				typ = kuberuntime.ContainerTypeInit
			}
		}
		w.m.recorder.Eventf(kuberuntime.ContainerRef(w.pod, w.container.Name, typ), corev1.EventTypeWarning, "Unhealthy",
			"%s%s probe failed: %s", strings.ToUpper(string(w.typ[:1])), w.typ[1:], msg)
	}
	if ok == w.lastResult {
		w.count++
	} else {
		w.lastResult, w.count = ok, 1
	}
	failure := max(w.probe.FailureThreshold, 1)
	success := max(w.probe.SuccessThreshold, 1)
	if (!ok && w.count < int(failure)) || (ok && w.count < int(success)) {
		return true
	}
	if !ok {
		w.m.log.Info("probe failed", "pod", w.pod.Namespace+"/"+w.pod.Name, "container", w.container.Name, "probe", w.typ, "output", msg)
	}
	w.m.set(w.uid, id, w.typ, ok)
	if !ok && (w.typ == Liveness || w.typ == Startup) {
		// The container is restarted; probe its successor, not this one.
		w.onHold = true
	}
	if ok && w.typ == Startup {
		w.onHold = true
	}
	return true
}

// runProbe executes the handler once.
func (w *worker) runProbe(ctx context.Context, podIP, containerID string) (bool, string) {
	timeout := time.Duration(max(w.probe.TimeoutSeconds, 1)) * time.Second
	h := w.probe.ProbeHandler
	switch {
	case h.Exec != nil:
		stdout, stderr, err := w.m.runtime.ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return false, fmt.Sprintf("%v: %s%s", err, stdout, stderr)
		}
		return true, string(stdout)
	case h.HTTPGet != nil:
		return w.httpProbe(ctx, h.HTTPGet, podIP, timeout)
	case h.TCPSocket != nil:
		host := h.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		port, err := resolvePort(h.TCPSocket.Port, w.container)
		if err != nil {
			return false, err.Error()
		}
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		_ = conn.Close()
		return true, ""
	case h.GRPC != nil:
		return false, "gRPC probes are not supported by this kubelet"
	}
	return false, "probe has no handler"
}

func (w *worker) httpProbe(ctx context.Context, g *corev1.HTTPGetAction, podIP string, timeout time.Duration) (bool, string) {
	host := g.Host
	if host == "" {
		host = podIP
	}
	port, err := resolvePort(g.Port, w.container)
	if err != nil {
		return false, err.Error()
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if i := strings.IndexByte(g.Path, '?'); i >= 0 {
		u.Path, u.RawQuery = g.Path[:i], g.Path[i+1:]
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	// Probes, like the kubelet's, do not verify certificates and do not follow redirects
	// to other hosts.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return true, ""
	}
	return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}

// rawID drops the "type://" prefix of an API container id.
func rawID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", p.StrVal, c.Name)
}
