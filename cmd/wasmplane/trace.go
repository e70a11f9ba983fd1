package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/scheduler"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// newTrace is `wasmplane trace pod NAME`: one pod's journey through the flow.
func newTrace() *cobra.Command {
	var kubeconfig, dataDir, namespace string
	var raw bool
	pod := &cobra.Command{
		Use:   "pod NAME",
		Short: "Show a pod's journey: authentication, admission, initializers, scheduling, binding, kubelet",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kubeconfig == "" {
				kubeconfig = os.Getenv("KUBECONFIG")
			}
			if kubeconfig == "" {
				kubeconfig = filepath.Join(dataDir, "admin.kubeconfig")
			}
			loader := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loader, &clientcmd.ConfigOverrides{})
			cfg, err := cc.ClientConfig()
			if err != nil {
				return fmt.Errorf("loading %s: %w", kubeconfig, err)
			}
			if namespace == "" {
				if namespace, _, err = cc.Namespace(); err != nil || namespace == "" {
					namespace = "default"
				}
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			body, err := cs.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").Name(args[0]).SubResource("trace").DoRaw(cmd.Context())
			if err != nil {
				return fmt.Errorf("reading the trace of pod %s/%s: %w", namespace, args[0], err)
			}
			if raw {
				_, err = cmd.OutOrStdout().Write(body)
				return err
			}
			var t resources.PodTrace
			if err := json.Unmarshal(body, &t); err != nil {
				return fmt.Errorf("decoding the trace: %w", err)
			}
			return printTrace(cmd.OutOrStdout(), &t)
		},
	}
	f := pod.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG, else <data-dir>/admin.kubeconfig)")
	f.StringVar(&dataDir, "data-dir", ".wasmplane", "the data dir of wasmplane up")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace (default the kubeconfig's, else default)")
	f.BoolVar(&raw, "raw", false, "print the JSON the API returns (GET pods/NAME/trace)")
	root := &cobra.Command{Use: "trace", Short: "Show how an object went through the control plane"}
	root.AddCommand(pod)
	return root
}

// printTrace writes the steps as a timeline relative to the first one.
func printTrace(w io.Writer, t *resources.PodTrace) error {
	fmt.Fprintf(w, "pod %s/%s (uid %s)\n", t.Metadata.Namespace, t.Metadata.Name, t.Metadata.UID)
	if !t.Recorded {
		fmt.Fprintln(w, "(this API server did not see the pod being created; showing what the pod's status tells)")
	}
	if len(t.Steps) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tTOOK\tCOMPONENT\tSTEP\tRESULT\tDETAIL")
	t0 := t.Steps[0].Time
	for _, s := range t.Steps {
		detail := s.Detail
		if s.Component == "scheduler" {
			detail = schedulingDetail(detail)
		}
		if s.Count > 1 {
			// Repeated attempts with the same outcome are one row (trace.Store.Fold).
			detail += fmt.Sprintf("; %d attempts, the last at +%s", s.Count, s.Last.Sub(t0).Round(time.Millisecond))
		}
		took := ""
		if s.Duration > 0 {
			took = s.Duration.Round(time.Microsecond).String()
		}
		fmt.Fprintf(tw, "+%s\t%s\t%s\t%s\t%s\t%s\n", s.Time.Sub(t0).Round(time.Millisecond), took, s.Component, s.Step, s.Result, oneLine(detail))
	}
	return tw.Flush()
}

// schedulingDetail words the scheduler's JSON summary.
func schedulingDetail(js string) string {
	var s scheduler.Summary
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		return js
	}
	var b strings.Builder
	fmt.Fprintf(&b, "profile %s: %d/%d nodes feasible", s.Profile, s.Feasible, s.Nodes)
	plugins := make([]string, 0, len(s.Rejected))
	for p := range s.Rejected {
		plugins = append(plugins, p)
	}
	slices.Sort(plugins)
	for _, p := range plugins {
		r := s.Rejected[p]
		fmt.Fprintf(&b, "; %s rejected %d (%s)", p, r.Nodes, strings.Join(r.Reasons, "; "))
	}
	if s.Message != "" && len(s.Rejected) == 0 {
		// No Filter verdicts to list (no nodes, a Permit rejection, an error): the reason.
		fmt.Fprintf(&b, "; %s", s.Message)
	}
	for i, n := range s.Top {
		names := make([]string, 0, len(n.Scores))
		for p := range n.Scores {
			names = append(names, p)
		}
		slices.Sort(names)
		parts := make([]string, 0, len(names))
		for _, p := range names {
			parts = append(parts, fmt.Sprintf("%s=%d", p, n.Scores[p]))
		}
		fmt.Fprintf(&b, "; #%d %s %d [%s]", i+1, n.Node, n.Total, strings.Join(parts, " "))
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
