package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"github.com/wasmplane/wasmplane/tests/internal/simnode"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// side is one set of controllers under test.
type side struct {
	name string
	// kcmArgs, when not nil, run kube-controller-manager with these extra flags instead
	// of wasmplane's controllers.
	kcmArgs []string
}

const (
	sideWasmplane = "wasmplane"
	sideKCM       = "kcm"
	sideKCMQPS    = "kcm-qps2000"
)

func sideNames() []string { return []string{sideWasmplane, sideKCM, sideKCMQPS} }

// sideNamed: kcm is kube-controller-manager with its default client rate limit (20 QPS,
// burst 30); kcm-qps2000 lifts it to wasmplane's controllers' (server.ControllerQPS).
func sideNamed(name string, o options) (side, error) {
	extra := strings.Fields(o.kcmArgs)
	switch name {
	case sideWasmplane:
		return side{name: name}, nil
	case sideKCM:
		return side{name: name, kcmArgs: append([]string{}, extra...)}, nil
	case sideKCMQPS:
		return side{name: name, kcmArgs: append([]string{fmt.Sprintf("--kube-api-qps=%d", server.ControllerQPS),
			fmt.Sprintf("--kube-api-burst=%d", server.ControllerBurst)}, extra...)}, nil
	}
	return side{}, fmt.Errorf("unknown side %q (have %s)", name, strings.Join(sideNames(), ", "))
}

// cluster is a running API server with one side's controllers and the simulated nodes.
type cluster struct {
	cs    kubernetes.Interface
	nodes *simnode.Cluster
	// added counts the simulated nodes registered so far.
	added int
}

// runSide starts a fresh server in a temporary directory — without its controllers:
// both sides run theirs as a separate process — starts s's controllers, runs the phase
// and records its figures in res.
func runSide(ctx context.Context, o options, s side, phase string, round int, res *results, log *slog.Logger) (err error) {
	dir, err := os.MkdirTemp("", "wasmplane-ctrlbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inst, err := server.Start(ctx, server.Config{DataDir: filepath.Join(dir, "server"), Port: 0, Logger: quiet,
		DisableControllers: true})
	if err != nil {
		return fmt.Errorf("starting wasmplane: %w", err)
	}
	defer inst.Close()
	// The controllers' process, whose CPU time each phase reports.
	var ctrl *os.Process
	if s.kcmArgs == nil {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this program to run the controller manager: %w", err)
		}
		args := []string{"-controller-manager-of", inst.KubeconfigPath()}
		if o.profileDir != "" && round == 0 {
			// The controller manager profiles itself from start to stop.
			if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
				return err
			}
			abs, err := filepath.Abs(filepath.Join(o.profileDir, s.name+"-"+phase+"-controllers.pprof"))
			if err != nil {
				return err
			}
			args = append(args, "-controller-manager-cpuprofile", abs)
		}
		cm, err := peers.StartBinary(self, dir, args...)
		if err != nil {
			return err
		}
		defer cm.Stop()
		ctrl = cm.Procs[filepath.Base(self)]
	} else {
		pki := filepath.Join(dir, "server", "pki")
		kcm, err := peers.StartControllerManager(ctx, o.peersDir, dir, peers.ControllerManagerOptions{
			Kubeconfig: inst.KubeconfigPath(), ServiceAccountKey: filepath.Join(pki, "sa.key"), RootCA: filepath.Join(pki, "ca.crt"),
			Controllers: "*", Args: s.kcmArgs})
		if err != nil {
			return err
		}
		defer func() {
			if err != nil || o.logDir != "" {
				kept := keepLog(dir, o.logDir, s.name+"-"+phase)
				if err != nil {
					err = fmt.Errorf("%w; kube-controller-manager's log is in %s (kept)", err, kept)
				}
			}
		}()
		defer kcm.Stop()
		ctrl = kcm.Procs["kube-controller-manager"]
	}
	cfg := inst.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0 // the controllers are measured, not this client
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nodes, err := simnode.Start(ctx, cs, 16, log)
	if err != nil {
		return err
	}
	defer nodes.Stop()
	c := &cluster{cs: cs, nodes: nodes}
	p := phase
	ns, err := c.namespace(ctx, p, o.phaseTimeout)
	if err != nil {
		return fmt.Errorf("phase %s: %w", p, err)
	}
	req0, err := requestCounts(ctx, cs)
	if err != nil {
		return err
	}
	cpu0, err := peers.CPUTime(ctrl.Pid)
	if err != nil {
		return err
	}
	if o.profileDir != "" && round == 0 {
		stop, err := startCPUProfile(o.profileDir, s.name+"-"+p)
		if err != nil {
			return err
		}
		defer stop()
	}
	self0, err := peers.SelfCPU()
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, o.phaseTimeout)
	figs, err := runPhase(pctx, c, o, p, ns)
	cancel()
	if err != nil {
		return fmt.Errorf("phase %s: %w", p, err)
	}
	self1, err := peers.SelfCPU()
	if err != nil {
		return err
	}
	cpu1, err := peers.CPUTime(ctrl.Pid)
	if err != nil {
		return err
	}
	req1, err := requestCounts(ctx, cs)
	if err != nil {
		return err
	}
	figs = append(figs, requestFigures(req0, req1)...)
	figs = append(figs, figure{name: "controller process CPU time in the phase", value: (cpu1 - cpu0).Seconds(), format: seconds},
		figure{name: "API server process CPU time in the phase (with etcd, scheduler, simulated nodes)", value: (self1 - self0).Seconds(), format: seconds})
	for _, f := range figs {
		fmt.Fprintf(os.Stderr, "  %s: %s %s\n", s.name, f.name, f.format(f.value))
		res.add(p, f, s.name)
	}
	return nil
}

// keepLog copies kube-controller-manager's log out of the directory about to be removed,
// into logDir (a temporary file when empty), and says where.
func keepLog(dir, logDir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if logDir == "" {
		logDir = os.TempDir()
	}
	f, err := os.CreateTemp(logDir, "kube-controller-manager-"+name+"-*.log")
	if err != nil {
		return "(not kept: " + err.Error() + ")"
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return "(not kept: " + err.Error() + ")"
	}
	return f.Name()
}

// ensureNodes registers simulated nodes until there are n.
func (c *cluster) ensureNodes(ctx context.Context, n int) error {
	if n <= c.added {
		return nil
	}
	if err := c.nodes.AddNodes(ctx, simnode.Names("sim", c.added, n-c.added), 110); err != nil {
		return err
	}
	c.added = n
	return nil
}

// namespace creates the phase's namespace and waits for its default ServiceAccount,
// which the controllers under test create: pods need it, and its arrival shows the
// controllers are running.
func (c *cluster) namespace(ctx context.Context, name string, timeout time.Duration) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return "", errors.Join(fmt.Errorf("waiting for the default ServiceAccount of %s", name), err)
	}
	return name, nil
}

// startCPUProfile profiles this process (the API server, etcd, the scheduler and the
// simulated nodes) into dir/name.pprof until the returned function is called.
func startCPUProfile(dir, name string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profiling %s: %w", name, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
