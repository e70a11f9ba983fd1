// Package nodestatus registers the kubelet's Node, renews its Lease in kube-node-lease
// (the heartbeat) and reports node conditions when they change and at least every
// report period, as the kubelet does.
package nodestatus

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
)

// Defaults, the kubelet's.
const (
	DefaultLeaseDuration         = 40 * time.Second
	DefaultRenewInterval         = 10 * time.Second
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
	DefaultMaxPods               = 110
)

// Client is the part of the API a node agent uses: nodes, pods, events and leases. A
// kubernetes.Interface is one; the agent builds one from these two groups' clients alone,
// so that it does not link every API group's client, informer and lister.
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// Config describes the node.
type Config struct {
	// Client talks to the API server.
	Client Client
	// Runtime is asked for its version and readiness.
	Runtime cri.RuntimeService
	// NodeName, Hostname and NodeIP identify the node.
	NodeName, Hostname, NodeIP string
	// Port is the kubelet's HTTPS port (daemonEndpoints.kubeletEndpoint).
	Port int
	// RootDir is measured for ephemeral-storage.
	RootDir string
	// MaxPods is the pods capacity (default 110).
	MaxPods int
	// Taints are registered with the node.
	Taints []corev1.Taint
	// Labels are added to the well-known ones.
	Labels map[string]string
	// LeaseDuration, RenewInterval, StatusUpdateFrequency and StatusReportFrequency tune
	// the heartbeat (defaults 40 s, 10 s, 10 s, 5 min).
	LeaseDuration, RenewInterval, StatusUpdateFrequency, StatusReportFrequency time.Duration
	// Logger receives logs.
	Logger *slog.Logger
}

// Reporter keeps the Node and its Lease up to date.
type Reporter struct {
	cfg        Config
	log        *slog.Logger
	nodeInfo   corev1.NodeSystemInfo
	lastReport time.Time
}

// New returns a Reporter with defaults filled in.
func New(cfg Config) *Reporter {
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = DefaultRenewInterval
	}
	if cfg.StatusUpdateFrequency <= 0 {
		cfg.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if cfg.StatusReportFrequency <= 0 {
		cfg.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reporter{cfg: cfg, log: cfg.Logger}
}

// RuntimeName asks the runtime its name (e.g. for container id prefixes).
func RuntimeName(ctx context.Context, rt cri.RuntimeService) (name, version string, err error) {
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		return "", "", fmt.Errorf("CRI Version: %w", err)
	}
	return v.GetRuntimeName(), v.GetRuntimeVersion(), nil
}

// Register creates the Node, or updates its labels, taints and status if it exists.
func (r *Reporter) Register(ctx context.Context) error {
	name, version, err := RuntimeName(ctx, r.cfg.Runtime)
	if err != nil {
		return err
	}
	r.nodeInfo = corev1.NodeSystemInfo{
		MachineID: machineID(), KernelVersion: kernelVersion(), OSImage: "wasmplane", ContainerRuntimeVersion: name + "://" + version,
		KubeletVersion: "v1.37.2-wasmplane", KubeProxyVersion: "", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		BootID: bootID(),
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Labels: r.labels()},
		Spec: corev1.NodeSpec{Taints: r.cfg.Taints}}
	node.Status = r.status(ctx, nil)
	created, err := r.cfg.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	switch {
	case err == nil:
		r.log.Info("registered node", "node", r.cfg.NodeName)
		node = created
	case apierrors.IsAlreadyExists(err):
		existing, err := r.cfg.Client.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading existing node: %w", err)
		}
		changed := false
		for k, v := range r.labels() {
			if existing.Labels[k] != v {
				if existing.Labels == nil {
					existing.Labels = map[string]string{}
				}
				existing.Labels[k] = v
				changed = true
			}
		}
		if changed {
			if existing, err = r.cfg.Client.CoreV1().Nodes().Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating node labels: %w", err)
			}
		}
		node = existing
	default:
		return fmt.Errorf("registering node %s: %w", r.cfg.NodeName, err)
	}
	if err := r.updateStatus(ctx, node, true); err != nil {
		return err
	}
	return r.renewLease(ctx, node)
}

// Run renews the Lease and updates the status until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	lease := time.NewTicker(r.cfg.RenewInterval)
	defer lease.Stop()
	status := time.NewTicker(r.cfg.StatusUpdateFrequency)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			if err := r.renewLease(ctx, nil); err != nil && ctx.Err() == nil {
				r.log.Warn("renewing node lease", "err", err)
			}
		case <-status.C:
			node, err := r.cfg.Client.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
			if err == nil {
				err = r.updateStatus(ctx, node, false)
			}
			if err != nil && ctx.Err() == nil {
				r.log.Warn("updating node status", "err", err)
			}
		}
	}
}

func (r *Reporter) labels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname: r.cfg.Hostname, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range r.cfg.Labels {
		l[k] = v
	}
	return l
}

// updateStatus patches the node status if its conditions changed, or if the report period
// has passed since the last post.
func (r *Reporter) updateStatus(ctx context.Context, node *corev1.Node, force bool) error {
	st := r.status(ctx, node)
	if !force && !conditionsChanged(node.Status.Conditions, st.Conditions) && time.Since(r.lastReport) < r.cfg.StatusReportFrequency &&
		node.Status.DaemonEndpoints.KubeletEndpoint.Port == int32(r.cfg.Port) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return fmt.Errorf("encoding node status: %w", err)
	}
	if _, err := r.cfg.Client.CoreV1().Nodes().Patch(ctx, r.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching node status: %w", err)
	}
	r.lastReport = time.Now()
	return nil
}

func conditionsChanged(old, cur []corev1.NodeCondition) bool {
	if len(old) != len(cur) {
		return true
	}
	for _, c := range cur {
		found := false
		for _, o := range old {
			if o.Type == c.Type {
				found = true
				if o.Status != c.Status || o.Reason != c.Reason {
					return true
				}
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// status computes the node's status; old supplies transition times.
func (r *Reporter) status(ctx context.Context, old *corev1.Node) corev1.NodeStatus {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(r.cfg.MaxPods), resource.DecimalSI),
	}
	if s := diskSize(r.cfg.RootDir); s > 0 {
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(s, resource.BinarySI)
	}
	now := metav1.Now()
	runtimeReady, msg := true, "kubelet is posting ready status"
	if resp, err := r.cfg.Runtime.Status(ctx, false); err != nil {
		runtimeReady, msg = false, fmt.Sprintf("container runtime is down: %v", err)
	} else {
		for _, c := range resp.GetStatus().GetConditions() {
			if c.GetType() == "RuntimeReady" && !c.GetStatus() {
				runtimeReady, msg = false, "container runtime not ready: "+c.GetReason()+": "+c.GetMessage()
			}
		}
	}
	cond := func(t corev1.NodeConditionType, ok bool, reason, message string) corev1.NodeCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
		if old != nil {
			for _, o := range old.Status.Conditions {
				if o.Type == t && o.Status == s {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
		}
		return c
	}
	readyReason := "KubeletReady"
	if !runtimeReady {
		readyReason = "KubeletNotReady"
	}
	addrs := []corev1.NodeAddress{}
	if r.cfg.NodeIP != "" {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: r.cfg.NodeIP})
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: r.cfg.Hostname})
	return corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity.DeepCopy(), Phase: "",
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, false, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, false, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, false, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, runtimeReady, readyReason, msg),
		},
		Addresses:       addrs,
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(r.cfg.Port)}},
		NodeInfo:        r.nodeInfo,
	}
}

// renewLease creates or renews the node's Lease; node, when known, becomes its owner so
// that deleting the Node deletes the Lease.
func (r *Reporter) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := r.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(r.cfg.LeaseDuration / time.Second)
	l, err := leases.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: r.cfg.NodeName, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &r.cfg.NodeName, LeaseDurationSeconds: &secs, RenewTime: &now}}
		if node == nil {
			node, _ = r.cfg.Client.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
		}
		if node != nil && node.UID != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node lease: %w", err)
	}
	l.Spec.RenewTime, l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &now, &r.cfg.NodeName, &secs
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing node lease: %w", err)
	}
	return nil
}

// memTotal reads MemTotal from /proc/meminfo (bytes).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func diskSize(dir string) int64 {
	if dir == "" {
		return 0
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize)
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func machineID() string { return readTrim("/etc/machine-id") }

func bootID() string { return readTrim("/proc/sys/kernel/random/boot_id") }

func kernelVersion() string { return readTrim("/proc/sys/kernel/osrelease") }
