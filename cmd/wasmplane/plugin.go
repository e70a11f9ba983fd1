package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit"
	"github.com/wasmplane/wasmplane/plugins/wasm/toolkit/toolchain"
)

// newPlugin is `wasmplane plugin`: scaffold, build, run, benchmark and install plugins.
// The logic lives in plugins/wasm/toolkit; these commands only map flags onto it.
func newPlugin() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Write, build, test, benchmark and install WebAssembly plugins",
	}
	cmd.AddCommand(newPluginInit(), newPluginDoctor(), newPluginBuild(), newPluginTest(), newPluginBench(), newPluginPush(), newPluginApply())
	return cmd
}

func newPluginInit() *cobra.Command {
	var o toolkit.InitOptions
	var lang string
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Scaffold a plugin project (source, README, sample request and config)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir, o.Lang = args[0], toolkit.Lang(lang)
			files, err := toolkit.Init(o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, f := range files {
				fmt.Fprintf(w, "wrote %s\n", f)
			}
			fmt.Fprintf(w, "\nnext:\n  wasmplane plugin build %s    # wasmplane plugin doctor lists the toolchains\n", args[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&lang, "lang", "go", "language: go, c, assemblyscript, rust or wat")
	f.StringVar(&o.Hook, "hook", "validate", "hook: validate, mutate, filter, score, authenticate or initialize")
	f.StringVar(&o.Repo, "sdk", "", "copy the SDK from this wasmplane checkout's sdk/ (default: the SDK built into this binary)")
	f.BoolVar(&o.Force, "force", false, "write into a non-empty directory")
	return cmd
}

func newPluginDoctor() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Tell, per language, whether its toolchain is installed and how to install what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return toolchain.WriteReport(cmd.OutOrStdout(), toolchain.DefaultEnv().Doctor(cmd.Context()))
		},
	}
}

func newPluginBuild() *cobra.Command {
	var o toolkit.BuildOptions
	var lang string
	cmd := &cobra.Command{
		Use:   "build [DIR]",
		Short: "Build a plugin project into a .wasm module with its language's toolchain",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Dir = "."
			if len(args) == 1 {
				o.Dir = args[0]
			}
			if lang != "" {
				l, err := toolkit.ParseLang(lang)
				if err != nil {
					return err
				}
				o.Lang = l
			}
			res, err := toolkit.Build(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%d bytes\tsha256:%s\t(%s)\n", res.Path, res.Size, res.SHA256, res.Lang)
			if res.Input != nil {
				// On stderr: scripts read the module's line from stdout.
				fmt.Fprintf(cmd.ErrOrStderr(), "the policy reads %s\n", res.Input)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Out, "output", "o", "", "module to write (default DIR/<DIR name>.wasm)")
	f.StringVar(&lang, "lang", "", "language (default: detected from the files)")
	f.StringVar(&o.Repo, "sdk", "", "wasmplane checkout holding sdk/, for projects that use it instead of a copy (those plugin init writes need none)")
	return cmd
}

// runFlags are the flags `test` and `bench` share.
type runFlags struct {
	hook, request, config, cacheDir string
	timeout                         time.Duration
	verbose                         bool
}

func (r *runFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.hook, "hook", "", "hook to call: validate, mutate, filter, score, authenticate or initialize")
	f.StringVar(&r.request, "request", "", "JSON request file (sdk/ABI.md §7; - reads standard input)")
	f.StringVar(&r.config, "config", "", "JSON config file passed to configure (default {})")
	f.DurationVar(&r.timeout, "timeout", wasm.DefaultTimeout, "deadline of one call")
	f.StringVar(&r.cacheDir, "cache-dir", toolkit.DefaultCacheDir(), "compilation cache (empty: none)")
	f.BoolVarP(&r.verbose, "verbose", "v", false, "show the plugin's log lines on standard error")
	_ = cmd.MarkFlagRequired("hook")
	_ = cmd.MarkFlagRequired("request")
}

// open loads the module and decodes the request, ready to call.
func (r *runFlags) open(cmd *cobra.Command, module string, instances int) (*toolkit.Runner, *toolkit.Call, error) {
	b, err := os.ReadFile(module)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the module: %w", err)
	}
	req, err := toolkit.ReadJSONFile(r.request, cmd.InOrStdin())
	if err != nil {
		return nil, nil, err
	}
	o := toolkit.RunOptions{Timeout: r.timeout, Instances: instances, CacheDir: r.cacheDir}
	if r.config != "" {
		if o.Config, err = toolkit.ReadJSONFile(r.config, cmd.InOrStdin()); err != nil {
			return nil, nil, err
		}
	}
	if r.verbose {
		o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	runner, err := toolkit.Open(cmd.Context(), b, o)
	if err != nil {
		return nil, nil, kindError(err)
	}
	call, err := runner.Prepare(r.hook, req)
	if err != nil {
		_ = runner.Close(context.Background())
		return nil, nil, err
	}
	return runner, call, nil
}

// kindError puts the host's error kind (sdk/ABI.md §4) first, so scripts can match it.
func kindError(err error) error {
	if k := wasm.KindOf(err); k != "" {
		return fmt.Errorf("[%s] %w", string(k), err)
	}
	return err
}

func newPluginTest() *cobra.Command {
	var r runFlags
	cmd := &cobra.Command{
		Use:   "test MODULE.wasm --hook H --request req.json",
		Short: "Call one hook of a module through the real host and print the JSON answer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runner, call, err := r.open(cmd, args[0], 1)
			if err != nil {
				return err
			}
			defer runner.Close(context.Background())
			out, err := call.Do(cmd.Context())
			if err != nil {
				return kindError(err)
			}
			return printJSON(cmd.OutOrStdout(), out)
		},
	}
	r.register(cmd)
	return cmd
}

// printJSON indents the answer keeping its member order, as the plugin wrote it.
func printJSON(w io.Writer, b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	out.WriteByte('\n')
	_, err := out.WriteTo(w)
	return err
}

func newPluginBench() *cobra.Command {
	var r runFlags
	var n, parallel int
	cmd := &cobra.Command{
		Use:   "bench MODULE.wasm --hook H --request req.json",
		Short: "Measure calls/s and latency of one hook through the real host",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runner, call, err := r.open(cmd, args[0], parallel)
			if err != nil {
				return err
			}
			defer runner.Close(context.Background())
			st, err := toolkit.Bench(cmd.Context(), call, n, parallel)
			if err != nil {
				return kindError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), st)
			if st.Errors > 0 {
				return kindError(st.FirstError)
			}
			return nil
		},
	}
	r.register(cmd)
	cmd.Flags().IntVarP(&n, "calls", "n", 10000, "number of calls")
	cmd.Flags().IntVarP(&parallel, "parallel", "c", 1, "concurrent callers (and instances)")
	return cmd
}

func newPluginPush() *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   "push MODULE.wasm",
		Short: "Upload a module to the cluster's module store and print its digest",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("reading the module: %w", err)
			}
			c, err := toolkit.NewClient(kubeconfig)
			if err != nil {
				return err
			}
			m, created, err := c.PushIn(cmd.Context(), b, namespace)
			if err != nil {
				return err
			}
			state := "already stored"
			if created {
				state = "stored"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", m.Spec.Digest)
			fmt.Fprintf(cmd.ErrOrStderr(), "wasmmodule.wasmplane.io/%s %s (%d bytes)\n", m.Name, state, m.Spec.Size)
			return nil
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, else "+toolkit.DefaultKubeconfig+")")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace whose WasmPlugins may run the module (empty: cluster plugins only, unless an admin shares it)")
	return cmd
}

func newPluginApply() *cobra.Command {
	var kubeconfig, module, namespace, config string
	var cluster bool
	var s toolkit.SpecOptions
	cmd := &cobra.Command{
		Use:   "apply NAME (--module M.wasm | --digest sha256:…) --hooks validate,…",
		Short: "Push a module if given and create or update a WasmPlugin (or ClusterWasmPlugin) pinning it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cluster && namespace != "" {
				return errors.New("give --namespace or --cluster, not both")
			}
			if config != "" {
				var err error
				if s.Config, err = toolkit.ReadJSONFile(config, cmd.InOrStdin()); err != nil {
					return err
				}
			}
			c, err := toolkit.NewClient(kubeconfig)
			if err != nil {
				return err
			}
			o := toolkit.InstallOptions{Name: args[0], ModuleFile: module, Spec: s}
			if !cluster {
				o.Namespace = namespace
				if o.Namespace == "" {
					o.Namespace = c.Namespace
				}
			}
			r, err := c.Install(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if r.Module != nil {
				state := "unchanged (already stored)"
				if r.Stored {
					state = "stored"
				}
				fmt.Fprintf(w, "wasmmodule.wasmplane.io/%s %s (%d bytes)\n", r.Module.Name, state, r.Module.Spec.Size)
			}
			fmt.Fprintf(w, "%s.wasmplane.io/%s %s (%s)\n", r.Resource, o.Name, r.Action, r.Spec.Module.Digest)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, else "+toolkit.DefaultKubeconfig+")")
	f.StringVar(&module, "module", "", "module file to push and pin")
	f.StringVar(&s.Digest, "digest", "", "digest of a module already pushed (sha256:<hex>)")
	f.StringSliceVar(&s.Hooks, "hooks", nil, "hooks the plugin is used for (comma-separated)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the WasmPlugin (default: the kubeconfig's, else default)")
	f.BoolVar(&cluster, "cluster", false, "make a cluster-wide ClusterWasmPlugin")
	f.StringVar(&config, "config", "", "JSON config file passed to the plugin's configure hook")
	f.StringArrayVar(&s.Rules, "rules", nil, "admission rule resources:OPERATIONS, e.g. pods:CREATE,UPDATE (repeatable)")
	f.StringVar(&s.FailurePolicy, "failure-policy", "", "Fail or Ignore (default: the server's, Fail)")
	f.StringVar(&s.ReinvocationPolicy, "reinvocation-policy", "", "IfNeeded or Never: run the mutate hook again when a later plugin changed the object (default: the server's, IfNeeded)")
	f.StringVar(&s.Initializer, "initializer", "", "initializer name the initialize hook serves")
	f.StringSliceVar(&s.Profiles, "profiles", nil, "scheduler profiles for filter/score (default default-scheduler)")
	f.Int32Var(&s.Weight, "weight", 0, "score weight (default 1)")
	_ = cmd.MarkFlagRequired("hooks")
	return cmd
}
