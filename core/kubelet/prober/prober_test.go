package prober

import (
	"context"
	"errors"
	"io"
	"k8s.io/apimachinery/pkg/util/wait"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func podWith(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func statusFn(started bool) StatusFunc {
	return func(types.UID) (corev1.PodStatus, bool) {
		return corev1.PodStatus{PodIP: "127.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
			Name: "c", ContainerID: "wasi://c1", Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Minute))}}}}}, true
	}
}

func newManager(t *testing.T, rt *critest.FakeRuntimeService, status StatusFunc) (*Manager, *atomic.Int32) {
	ctx, cancel := context.WithCancel(context.Background())
	var changes atomic.Int32
	m := NewManager(ctx, rt, status, func(types.UID) { changes.Add(1) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { cancel(); m.Wait() })
	return m, &changes
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestExecLivenessFailureThreshold(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	// Two failures in a row reach the threshold; a success in between would reset it.
	rt.InjectError("ExecSync", errors.New("exit 1"))
	rt.InjectError("ExecSync", errors.New("exit 1"))
	c := corev1.Container{Name: "c", LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"check"}}},
		PeriodSeconds: 1, FailureThreshold: 2}}
	m, changes := newManager(t, rt, statusFn(true))
	m.AddPod(podWith(c))
	if bad, _ := m.Unhealthy("c1"); bad {
		t.Fatal("unhealthy before any probe")
	}
	eventually(t, "liveness failure", func() bool { bad, _ := m.Unhealthy("c1"); return bad })
	if changes.Load() == 0 {
		t.Error("no change notification")
	}
	if _, probe := m.Unhealthy("c1"); probe != "liveness" {
		t.Errorf("probe = %q", probe)
	}
	m.RemovePod("u1")
}

func TestHTTPReadiness(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || r.Header.Get("X-Test") != "yes" {
			w.WriteHeader(404)
			return
		}
		w.WriteHeader(int(code.Load()))
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	c := corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Test", Value: "yes"}}}}, PeriodSeconds: 1, FailureThreshold: 1}}
	m, _ := newManager(t, critest.NewFakeRuntimeService(), statusFn(true))
	m.AddPod(podWith(c))
	eventually(t, "ready", func() bool { v, ok := m.Ready("c1"); return ok && v })
	code.Store(503)
	eventually(t, "not ready", func() bool { v, ok := m.Ready("c1"); return ok && !v })
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	w := &worker{m: &Manager{}, container: &corev1.Container{Name: "c"},
		probe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}, TimeoutSeconds: 1}}
	if ok, msg := w.runProbe(context.Background(), "127.0.0.1", "c1"); !ok {
		t.Errorf("open port: %s", msg)
	}
	ln.Close()
	if ok, _ := w.runProbe(context.Background(), "127.0.0.1", "c1"); ok {
		t.Error("closed port succeeded")
	}
}

func TestStartupProbeGatesLiveness(t *testing.T) {
	rt := critest.NewFakeRuntimeService()
	for range 20 {
		rt.InjectError("ExecSync", errors.New("failing"))
	}
	c := corev1.Container{Name: "c",
		StartupProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"start"}}}, PeriodSeconds: 1, FailureThreshold: 30},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"live"}}}, PeriodSeconds: 1, FailureThreshold: 1}}
	m, _ := newManager(t, rt, statusFn(false))
	m.AddPod(podWith(c))
	// The startup probe keeps failing below its threshold; liveness must not run at all.
	eventually(t, "startup probing", func() bool {
		rt.Lock()
		defer rt.Unlock()
		return len(rt.Called) >= 2
	})
	if bad, _ := m.Unhealthy("c1"); bad {
		t.Fatal("liveness ran before the container started")
	}
	if v, known := m.Started("c1"); known && v {
		t.Fatal("started while the startup probe fails")
	}
}
