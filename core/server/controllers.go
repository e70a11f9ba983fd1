package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/wasmplane/wasmplane/core/controller/namespace"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// startControllers runs the controllers against the API server through client-go, as a
// separate controller-manager would; the returned func stops them and waits.
func startControllers(ctx context.Context, cfg *rest.Config, log *slog.Logger) (func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-controller-manager"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller metadata client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	nsc, err := namespace.New(client, md, factory, log)
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	factory.Start(ctx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		nsc.Run(ctx, 2)
	}()
	return func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}, nil
}
