// Package peers starts the real Kubernetes control plane — etcd and kube-apiserver,
// optionally kube-controller-manager — from binaries built by
// /work/shared/tools/k8s-peers/build.sh, so that benchmarks and compatibility tests can
// run the same workload against it and against wasmplane in one run.
package peers

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultDir is where build.sh is asked to put the binaries when a caller names none.
func DefaultDir() string {
	if d := os.Getenv("WASMPLANE_PEERS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "wasmplane-peers")
}

// Available tells whether dir holds the named binaries.
func Available(dir string, names ...string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Options configure a control plane.
type Options struct {
	// Dir holds the binaries (etcd, kube-apiserver, kube-controller-manager).
	Dir string
	// WorkDir holds the data and logs; it must exist and is not removed.
	WorkDir string
	// ControllerManager also starts kube-controller-manager with its default controllers
	// (Controllers, when set, is passed as --controllers).
	ControllerManager bool
	Controllers       string
	// APIServerArgs are extra kube-apiserver flags.
	APIServerArgs []string
}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	// Kubeconfig is the path of an admin kubeconfig (system:masters, bearer token).
	Kubeconfig string
	// URL is the API server's https address.
	URL string
	// Procs are the processes by name ("etcd", "kube-apiserver", ...), for RSS figures.
	Procs map[string]*os.Process
	cmds  []*exec.Cmd
}

// RESTConfig is an admin client configuration.
func (c *ControlPlane) RESTConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
}

// Stop kills the processes and waits for them.
func (c *ControlPlane) Stop() {
	for i := len(c.cmds) - 1; i >= 0; i-- {
		cmd := c.cmds[i]
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	c.cmds = nil
}

// Start starts etcd and kube-apiserver on free loopback ports and waits until the API
// server is ready (and the controller manager healthy, when asked for).
func Start(ctx context.Context, o Options) (_ *ControlPlane, err error) {
	if !Available(o.Dir, "etcd", "kube-apiserver") {
		return nil, fmt.Errorf("no etcd and kube-apiserver in %s: build them with /work/shared/tools/k8s-peers/build.sh %s", o.Dir, o.Dir)
	}
	c := &ControlPlane{Procs: map[string]*os.Process{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	client, peer, secure, kcmPort := ports[0], ports[1], ports[2], ports[3]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	if err := c.start(o, "etcd", "--data-dir", filepath.Join(o.WorkDir, "etcd"), "--name", "peer",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "peer="+peerURL, "--quota-backend-bytes", strconv.Itoa(8<<30)); err != nil {
		return nil, err
	}
	token, err := credentials(o.WorkDir)
	if err != nil {
		return nil, err
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(secure)
	args := append([]string{"--etcd-servers", etcdURL, "--secure-port", strconv.Itoa(secure),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--cert-dir", filepath.Join(o.WorkDir, "certs"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(o.WorkDir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(o.WorkDir, "sa.key"),
		"--token-auth-file", filepath.Join(o.WorkDir, "tokens.csv"),
		"--authorization-mode", "Node,RBAC",
		"--service-cluster-ip-range", "10.96.0.0/12",
		// A loopback advertise address is refused by the endpoint reconcilers.
		"--endpoint-reconciler-type", "none"}, o.APIServerArgs...)
	if err := c.start(o, "kube-apiserver", args...); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(o.WorkDir, "admin.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["peer"] = &clientcmdapi.Cluster{Server: c.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["peer"] = &clientcmdapi.Context{Cluster: "peer", AuthInfo: "admin"}
	kc.CurrentContext = "peer"
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return nil, fmt.Errorf("writing the peer kubeconfig: %w", err)
	}
	if err := waitHealthy(ctx, c.URL+"/readyz", token, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("kube-apiserver not ready: %w; the end of its log:\n%s", err, logTail(filepath.Join(o.WorkDir, "kube-apiserver.log")))
	}
	if o.ControllerManager {
		if err := c.startControllerManager(ctx, o, kcmPort, ControllerManagerOptions{Kubeconfig: c.Kubeconfig,
			ServiceAccountKey: filepath.Join(o.WorkDir, "sa.key"), RootCA: filepath.Join(o.WorkDir, "certs", "apiserver.crt"),
			Controllers: o.Controllers}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ControllerManagerOptions say which API server a kube-controller-manager works for.
type ControllerManagerOptions struct {
	// Kubeconfig is an admin kubeconfig of the API server (it also authenticates and
	// authorizes the controller manager's own health requests).
	Kubeconfig string
	// ServiceAccountKey is the private key ServiceAccount tokens are signed with;
	// RootCA is the CA bundle put into them.
	ServiceAccountKey, RootCA string
	// Controllers, when set, is passed as --controllers.
	Controllers string
	// Args are extra flags (e.g. --kube-api-qps).
	Args []string
}

// StartControllerManager starts kube-controller-manager from dir (logging to
// workDir/kube-controller-manager.log) against any API server, the way kubeadm runs it
// but without leader election, and waits until it is healthy.
func StartControllerManager(ctx context.Context, dir, workDir string, cm ControllerManagerOptions) (_ *ControlPlane, err error) {
	if !Available(dir, "kube-controller-manager") {
		return nil, fmt.Errorf("no kube-controller-manager in %s: build it with /work/shared/tools/k8s-peers/build.sh %s", dir, dir)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	c := &ControlPlane{Procs: map[string]*os.Process{}, Kubeconfig: cm.Kubeconfig}
	if err := c.startControllerManager(ctx, Options{Dir: dir, WorkDir: workDir}, ports[0], cm); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *ControlPlane) startControllerManager(ctx context.Context, o Options, port int, cm ControllerManagerOptions) error {
	args := []string{"--kubeconfig", cm.Kubeconfig, "--authentication-kubeconfig", cm.Kubeconfig,
		"--authorization-kubeconfig", cm.Kubeconfig, "--leader-elect=false",
		"--secure-port", strconv.Itoa(port), "--bind-address", "127.0.0.1",
		"--service-account-private-key-file", cm.ServiceAccountKey,
		"--use-service-account-credentials=false", "--root-ca-file", cm.RootCA,
		"--cluster-signing-duration", "8760h"}
	if cm.Controllers != "" {
		args = append(args, "--controllers", cm.Controllers)
	}
	if err := c.start(o, "kube-controller-manager", append(args, cm.Args...)...); err != nil {
		return err
	}
	if err := waitHealthy(ctx, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "", time.Minute); err != nil {
		return fmt.Errorf("kube-controller-manager not healthy: %w; the end of its log:\n%s", err, logTail(filepath.Join(o.WorkDir, "kube-controller-manager.log")))
	}
	return nil
}

// start runs one binary with its output in WorkDir/NAME.log.
func (c *ControlPlane) start(o Options, name string, args ...string) error {
	log, err := os.Create(filepath.Join(o.WorkDir, name+".log"))
	if err != nil {
		return fmt.Errorf("log of %s: %w", name, err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(o.Dir, name), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.cmds = append(c.cmds, cmd)
	c.Procs[name] = cmd.Process
	return nil
}

// credentials writes the service-account key and a token file with one admin token.
func credentials(dir string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("service-account key: %w", err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pemKey, 0o600); err != nil {
		return "", fmt.Errorf("writing the service-account key: %w", err)
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b)
	line := token + `,admin,admin-uid,"system:masters"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(line), 0o600); err != nil {
		return "", fmt.Errorf("writing the token file: %w", err)
	}
	return token, nil
}

// waitHealthy polls url until it answers 200.
func waitHealthy(ctx context.Context, url, token string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %d", url, resp.StatusCode)
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != nil {
		return errors.Join(err, last)
	}
	return err
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// RSS returns the resident set size of a process in bytes, from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of %d: %w", pid, err)
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &kb); n == 1 {
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}

// StartBinary runs bin with args, its output in workDir/<base name of bin>.log, until
// Stop; the process dies with its parent.
func StartBinary(bin, workDir string, args ...string) (*ControlPlane, error) {
	c := &ControlPlane{Procs: map[string]*os.Process{}}
	if err := c.start(Options{Dir: filepath.Dir(bin), WorkDir: workDir}, filepath.Base(bin), args...); err != nil {
		return nil, err
	}
	return c, nil
}

// CPUTime is the CPU time the control plane's processes have used so far (kube-apiserver's
// etcd too; wasmplane's etcd is embedded), each counted once: a process may be listed
// under two names (wasmplane's also as "wasmplane" when its binary is named otherwise).
func (c *ControlPlane) CPUTime() (time.Duration, error) {
	var total time.Duration
	seen := map[int]bool{}
	for name, p := range c.Procs {
		if p == nil || seen[p.Pid] {
			continue
		}
		seen[p.Pid] = true
		t, err := CPUTime(p.Pid)
		if err != nil {
			return 0, fmt.Errorf("CPU time of %s: %w", name, err)
		}
		total += t
	}
	return total, nil
}

// SelfCPU is the CPU time (user and system) this process has used so far: in a
// benchmark, its clients' share of the machine.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// CPUTime returns the CPU time (user and system) a process has used, from /proc.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the stat of %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: the fields follow its end.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat of %d", pid)
	}
	// utime and stime, fields 14 and 15 of stat(5), in clock ticks of 1/100 s (the
	// USER_HZ of every Linux architecture Go supports).
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// BuildWasmplane builds ./cmd/wasmplane (run from the module root) into dir.
func BuildWasmplane(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "wasmplane")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/wasmplane").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building wasmplane: %v: %s", err, out)
	}
	return bin, nil
}

// StartWasmplane starts `bin up` (built from ./cmd/wasmplane into WorkDir when bin is
// empty) with its data in WorkDir/data on a free port, and waits until it serves.
func StartWasmplane(ctx context.Context, bin, workDir string, upArgs ...string) (_ *ControlPlane, err error) {
	if bin == "" {
		if bin, err = BuildWasmplane(ctx, workDir); err != nil {
			return nil, err
		}
	}
	c := &ControlPlane{Procs: map[string]*os.Process{}}
	args := append([]string{"up", "--data-dir", filepath.Join(workDir, "data"), "--port", "0", "--log-level", "warn"}, upArgs...)
	if err := c.start(Options{Dir: filepath.Dir(bin), WorkDir: workDir}, filepath.Base(bin), args...); err != nil {
		return nil, err
	}
	c.Procs["wasmplane"] = c.Procs[filepath.Base(bin)]
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	c.Kubeconfig = filepath.Join(workDir, "data", "admin.kubeconfig")
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return false, nil
		}
		c.URL = cfg.Host
		rc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return false, nil
		}
		resp, err := rc.Get(cfg.Host + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wasmplane not ready: %w; the end of its log:\n%s", err, logTail(filepath.Join(workDir, filepath.Base(bin)+".log")))
	}
	return c, nil
}

// logTail is the last lines of a log, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// CPUProfile takes a CPU profile of the server behind cs (its /debug/pprof/profile) for
// the given time and writes it to dir/<name with dashes for spaces>.pprof.
func CPUProfile(ctx context.Context, cs kubernetes.Interface, d time.Duration, dir, name string) error {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".pprof"), data, 0o644)
}
