package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wasmplane/wasmplane/runtime/cri/wasi"
)

// defaultRuntimeRoot is the built-in runtime's state directory, the one `up` uses under its
// default --data-dir (<data-dir>/node/runtime), so `image import` with no --root feeds the
// node `up` runs.
const defaultRuntimeRoot = ".wasmplane/node/runtime"

// newRuntime is `wasmplane runtime`: the built-in WASI CRI runtime alone.
func newRuntime() *cobra.Command {
	var listen, root, logLevel string
	var maxRunning int
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Serve the built-in CRI runtime (containers are WASI modules) on a unix socket",
		Long: "Serve the built-in CRI v1 runtime alone. Containers are WASI (wasip1) modules run by\n" +
			"wazero; images come from the local store (`wasmplane image import`). Any CRI client\n" +
			"works: the kubelet, crictl, critest.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := wasi.Serve(ctx, wasi.Config{Socket: listen, RootDir: root, Logger: log, MaxRunningContainers: maxRunning})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "CRI runtime listening on %s\n\n  crictl --runtime-endpoint %s version\n\n", srv.Endpoint(), srv.Endpoint())
			<-ctx.Done()
			log.Info("shutting down the CRI runtime")
			return srv.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "unix:///run/wasmplane/cri.sock", "CRI endpoint to serve (unix:///path or a path)")
	f.StringVar(&root, "root", defaultRuntimeRoot, "state directory: images, sandboxes, containers, compilation cache")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.IntVar(&maxRunning, "max-running-containers", 0, "containers running guest code at once, so that spinning ones leave the runtime a CPU (0: GOMAXPROCS − 1, at least 1)")
	return cmd
}
