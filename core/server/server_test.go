package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestStartStopsWhatStartedOnFailure checks the one way the components stop: a failing
// component (the API server, whose port is taken) stops those started before it (the
// embedded etcd), so the same data dir starts cleanly afterwards.
func TestStartStopsWhatStartedOnFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the API server")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = Start(ctx, Config{DataDir: dir, Port: taken.Addr().(*net.TCPAddr).Port, Logger: log,
		DisableControllers: true, DisableScheduler: true})
	if err == nil || !strings.HasPrefix(err.Error(), "starting the API server: listening:") {
		t.Fatalf("Start on a taken port: got %v, want an error naming the API server", err)
	}
	inst, err := Start(ctx, Config{DataDir: dir, Port: 0, Logger: log, DisableControllers: true, DisableScheduler: true})
	if err != nil {
		t.Fatalf("Start after a failed start on the same data dir: %v", err)
	}
	client, err := kubernetes.NewForConfig(inst.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Fatalf("reading kube-system: %v", err)
	}
	inst.Close()
	select {
	case <-inst.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if inst.Err() != nil {
		t.Fatalf("Err after a requested stop: %v", inst.Err())
	}
}
