package status

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Client reaches pods/status; a kubernetes.Interface is one.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
}

// Manager writes pod statuses to the API server when they change and remembers the last
// one written (probes and the log server read it).
type Manager struct {
	client Client
	log    *slog.Logger
	mu     sync.Mutex
	last   map[types.UID]entry
}

type entry struct {
	status corev1.PodStatus
	json   []byte
}

// NewManager returns a Manager writing through client.
func NewManager(client Client, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{client: client, log: log, last: map[types.UID]entry{}}
}

// canonical encodes a status the way the API stores it (times to the second), so that
// equal statuses compare equal whatever their in-memory precision.
func canonical(st *corev1.PodStatus) []byte {
	b, _ := json.Marshal(st)
	var back corev1.PodStatus
	_ = json.Unmarshal(b, &back)
	b, _ = json.Marshal(&back)
	return b
}

// Get is the last status set for a pod.
func (m *Manager) Get(uid types.UID) (corev1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.last[uid]
	return e.status, ok
}

// SetPodStatus patches pods/status when st differs from what was last written (or, after
// a restart, from what the API object holds); it reports whether it wrote.
func (m *Manager) SetPodStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) (bool, error) {
	b := canonical(&st)
	m.mu.Lock()
	e, ok := m.last[pod.UID]
	m.mu.Unlock()
	if ok && bytes.Equal(e.json, b) {
		return false, nil
	}
	if !ok && bytes.Equal(canonical(&pod.Status), b) {
		m.remember(pod.UID, st, b)
		return false, nil
	}
	// The uid in the patch is a precondition: a recreated pod of the same name is not
	// overwritten with its predecessor's status.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   json.RawMessage(b),
	})
	if err != nil {
		return false, fmt.Errorf("encoding status patch: %w", err)
	}
	_, err = m.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("patching status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.remember(pod.UID, st, b)
	return true, nil
}

func (m *Manager) remember(uid types.UID, st corev1.PodStatus, b []byte) {
	m.mu.Lock()
	m.last[uid] = entry{status: st, json: b}
	m.mu.Unlock()
}

// Forget drops a deleted pod.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.last, uid)
	m.mu.Unlock()
}
