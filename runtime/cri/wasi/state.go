package wasi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxRecord is a pod sandbox as persisted in <root>/sandboxes/<id>.json. It is an
// isolation group only: there is no pause process and no network namespace.
type sandboxRecord struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	UID            string            `json:"uid"`
	Namespace      string            `json:"namespace"`
	Attempt        uint32            `json:"attempt"`
	Hostname       string            `json:"hostname,omitempty"`
	LogDirectory   string            `json:"logDirectory,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	RuntimeHandler string            `json:"runtimeHandler,omitempty"`
	DNSServers     []string          `json:"dnsServers,omitempty"`
	DNSSearches    []string          `json:"dnsSearches,omitempty"`
	DNSOptions     []string          `json:"dnsOptions,omitempty"`
	Ready          bool              `json:"ready"`
	CreatedAt      int64             `json:"createdAt"`
}

// mountRecord is a CRI mount mapped into the guest.
type mountRecord struct {
	ContainerPath string `json:"containerPath"`
	HostPath      string `json:"hostPath"`
	Readonly      bool   `json:"readonly,omitempty"`
}

// containerRecord is a container as persisted in <root>/containers/<id>/state.json.
type containerRecord struct {
	ID           string            `json:"id"`
	SandboxID    string            `json:"sandboxId"`
	Name         string            `json:"name"`
	Attempt      uint32            `json:"attempt"`
	Image        string            `json:"image"`    // as requested (kubelet passes the pod's image)
	ImageRef     string            `json:"imageRef"` // sha256:<hex>
	Command      []string          `json:"command,omitempty"`
	Args         []string          `json:"args,omitempty"`
	Envs         [][2]string       `json:"envs,omitempty"`
	WorkingDir   string            `json:"workingDir,omitempty"`
	Mounts       []mountRecord     `json:"mounts,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	LogPath      string            `json:"logPath,omitempty"` // relative, as in the config
	MemoryLimit  int64             `json:"memoryLimit,omitempty"`
	ReadonlyRoot bool              `json:"readonlyRootfs,omitempty"`
	Stdin        bool              `json:"stdin,omitempty"`     // attach clients feed the guest's stdin
	StdinOnce    bool              `json:"stdinOnce,omitempty"` // closed after the first client's input ends
	State        string            `json:"state"`
	CreatedAt    int64             `json:"createdAt"`
	StartedAt    int64             `json:"startedAt,omitempty"`
	FinishedAt   int64             `json:"finishedAt,omitempty"`
	ExitCode     int32             `json:"exitCode"`
	Reason       string            `json:"reason,omitempty"`
	Message      string            `json:"message,omitempty"`
}

// Container states as persisted (the CRI enum names).
const (
	stateCreated = "CONTAINER_CREATED"
	stateRunning = "CONTAINER_RUNNING"
	stateExited  = "CONTAINER_EXITED"
)

func (c *containerRecord) criState() runtimeapi.ContainerState {
	return runtimeapi.ContainerState(runtimeapi.ContainerState_value[c.State])
}

func newID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

func nowNano() int64 { return time.Now().UnixNano() }

// writeJSON writes v to path atomically (temp file + rename). It skips fsync on purpose:
// the records are rebuilt-or-lost metadata and an fsync per CRI call would dominate
// RunPodSandbox/CreateContainer latency; a crash leaves the old or the new file, never a
// torn one.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}

func (s *Server) sandboxPath(id string) string {
	return filepath.Join(s.root, "sandboxes", id+".json")
}

func (s *Server) containerDir(id string) string {
	return filepath.Join(s.root, "containers", id)
}

func (s *Server) scratchDir(id string) string {
	return filepath.Join(s.containerDir(id), "rootfs")
}

// load reads the persisted records. Containers that were running when the previous runtime
// stopped are marked exited with code 255 and reason RuntimeRestarted: their guests died
// with the process.
func (s *Server) load() error {
	sbDir := filepath.Join(s.root, "sandboxes")
	ctDir := filepath.Join(s.root, "containers")
	for _, d := range []string{sbDir, ctDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("wasi: create %s: %w", d, err)
		}
	}
	ents, err := os.ReadDir(sbDir)
	if err != nil {
		return fmt.Errorf("wasi: read sandboxes: %w", err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var sb sandboxRecord
		if err := readJSON(filepath.Join(sbDir, e.Name()), &sb); err != nil {
			s.log.Warn("skipping unreadable sandbox record", "file", e.Name(), "err", err)
			continue
		}
		s.sandboxes[sb.ID] = &sandbox{rec: sb}
		indexAdd(s.sandboxesByPod, sb.Labels, sb.ID)
	}
	ents, err = os.ReadDir(ctDir)
	if err != nil {
		return fmt.Errorf("wasi: read containers: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		var c containerRecord
		if err := readJSON(filepath.Join(ctDir, e.Name(), "state.json"), &c); err != nil {
			s.log.Warn("skipping unreadable container record", "dir", e.Name(), "err", err)
			continue
		}
		ct := &container{rec: c}
		if c.State == stateRunning {
			ct.rec.State = stateExited
			ct.rec.ExitCode = 255
			ct.rec.Reason = "RuntimeRestarted"
			ct.rec.Message = "the runtime restarted while the container was running"
			ct.rec.FinishedAt = nowNano()
			if err := writeJSON(filepath.Join(ctDir, e.Name(), "state.json"), &ct.rec); err != nil {
				s.log.Warn("persist exited container", "id", c.ID, "err", err)
			}
		}
		s.containers[c.ID] = ct
		indexAdd(s.containersByPod, c.Labels, c.ID)
		if sb, ok := s.sandboxes[c.SandboxID]; ok {
			sb.containers = append(sb.containers, c.ID)
		}
		s.names[containerNameKey(c.SandboxID, c.Name, c.Attempt)] = c.ID
	}
	for _, sb := range s.sandboxes {
		s.names[sandboxNameKey(&sb.rec)] = sb.rec.ID
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

func sandboxNameKey(r *sandboxRecord) string {
	return fmt.Sprintf("sandbox/%s_%s_%s_%d", r.Name, r.Namespace, r.UID, r.Attempt)
}

func containerNameKey(sandboxID, name string, attempt uint32) string {
	return fmt.Sprintf("container/%s/%s_%d", sandboxID, name, attempt)
}

// errNotFound marks lookups of unknown ids; the gRPC layer maps it to NotFound.
var errNotFound = errors.New("not found")

// lookupID resolves an id or a unique prefix of one, as crictl users type them.
func lookupID[T any](m map[string]T, id string) (string, T, error) {
	var zero T
	if v, ok := m[id]; ok {
		return id, v, nil
	}
	if id == "" {
		return "", zero, errNotFound
	}
	found := ""
	for k := range m {
		if strings.HasPrefix(k, id) {
			if found != "" {
				return "", zero, fmt.Errorf("id prefix %q is ambiguous", id)
			}
			found = k
		}
	}
	if found == "" {
		return "", zero, errNotFound
	}
	return found, m[found], nil
}

// podUIDLabel is the label the kubelet gives a pod's sandboxes and containers.
const podUIDLabel = "io.kubernetes.pod.uid"

// indexAdd records id under its pod-UID label, if it has one.
func indexAdd(idx map[string][]string, labels map[string]string, id string) {
	if uid, ok := labels[podUIDLabel]; ok {
		idx[uid] = append(idx[uid], id)
	}
}

// indexRemove forgets id under its pod-UID label.
func indexRemove(idx map[string][]string, labels map[string]string, id string) {
	uid, ok := labels[podUIDLabel]
	if !ok {
		return
	}
	ids := slices.DeleteFunc(idx[uid], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(idx, uid)
	} else {
		idx[uid] = ids
	}
}

// candidates are the ids a list must look at: those indexed under the selector's pod UID
// when it has one (the caller still applies the whole filter), else all of them.
func candidates[T any](all map[string]T, idx map[string][]string, selector map[string]string) []string {
	if uid, ok := selector[podUIDLabel]; ok {
		return idx[uid]
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	return ids
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
