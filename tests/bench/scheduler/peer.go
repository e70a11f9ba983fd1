package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// startPeer starts another scheduler binary (kube-scheduler) against the in-process
// server and returns once it has bound a probe pod, so that, as for wasmplane's
// scheduler, its start-up (informer sync over every node) is not timed. Its log goes to
// peer.log in dataDir, printed on failure.
func startPeer(ctx context.Context, client kubernetes.Interface, peer peerRun, kubeconfig, dataDir string) (stop func(), err error) {
	logPath := filepath.Join(dataDir, "peer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0", "--v=1"}, peer.args...)
	if peer.config != "" {
		// With --config, kube-scheduler ignores --kubeconfig and the --kube-api-* flags:
		// the file names the kubeconfig, as the placeholder KUBECONFIG.
		b, err := os.ReadFile(peer.config)
		if err != nil {
			return nil, err
		}
		cfg := filepath.Join(dataDir, "peer-config.yaml")
		if err := os.WriteFile(cfg, bytes.ReplaceAll(b, []byte("KUBECONFIG"), []byte(kubeconfig)), 0o600); err != nil {
			return nil, err
		}
		args = append([]string{"--config=" + cfg, "--secure-port=0", "--v=1"}, peer.args...)
	}
	cmd := exec.Command(peer.path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", peer.path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	}
	fail := func(err error) (func(), error) {
		stop()
		tail, _ := os.ReadFile(logPath)
		if len(tail) > 20000 {
			tail = tail[len(tail)-20000:]
		}
		return nil, fmt.Errorf("%s: %w\n--- its log (end) ---\n%s", peer.path, err, tail)
	}
	const probeNS = "bench-probe"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNS}}, metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("probe namespace: %w", err))
	}
	if _, err := client.CoreV1().Pods(probeNS).Create(ctx, benchPod(probeNS, "probe"), metav1.CreateOptions{}); err != nil {
		return fail(fmt.Errorf("probe pod: %w", err))
	}
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := client.CoreV1().Pods(probeNS).Get(ctx, "probe", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" {
			return stop, nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fail(fmt.Errorf("exited before binding the probe pod: %v", err))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("did not bind the probe pod within a minute"))
		}
	}
}
