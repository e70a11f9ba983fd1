package server

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/manager"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// newPluginManager builds the manager that loads WASM admission plugins from the plugin
// objects, talking to this server through its loopback address.
func newPluginManager(cfg *rest.Config, rt *wasm.Runtime, initTimeout time.Duration, log *slog.Logger, an manager.AuthnConfig) (*manager.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "wasmplane-plugin-manager"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin manager client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin manager dynamic client: %w", err)
	}
	host, _ := os.Hostname()
	return manager.New(manager.Config{Runtime: rt, Client: client, Dynamic: dyn, ServerName: "apiserver-" + host, Logger: log, InitializerTimeout: initTimeout, Authn: an}), nil
}
