package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/wasmplane/wasmplane/core/controlplane/apfbootstrap"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericmux "k8s.io/apiserver/pkg/server/mux"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
)

// apfDebugPrefix is where the controller's dump_* debugging endpoints live.
const apfDebugPrefix = "/debug/api_priority_and_fairness/"

// flowControl is API Priority and Fairness for one API server: k8s.io/apiserver's config
// controller over informers on the server's own loopback client, and the bootstrap
// configuration ensurer.
type flowControl struct {
	controller utilflowcontrol.Interface
	factory    informers.SharedInformerFactory
	ensurer    *apfbootstrap.Ensurer
	debug      http.Handler
	log        *slog.Logger
}

// newFlowControl builds API Priority and Fairness with concurrencyLimit seats (the sum
// of the two in-flight limits, as kube-apiserver computes it). Nothing runs until start.
func newFlowControl(loopback *rest.Config, concurrencyLimit int, bootstrapInterval time.Duration, log *slog.Logger) (*flowControl, error) {
	cfg := rest.CopyConfig(loopback)
	cfg.UserAgent = "wasmplane-apiserver/priority-and-fairness"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("priority and fairness client: %w", err)
	}
	// The library's metrics are package variables registered into component-base's
	// global registry (once per process); /metrics serves them from there.
	fcmetrics.Register()
	factory := informers.NewSharedInformerFactory(client, 0)
	fc := utilflowcontrol.New(factory, client.FlowcontrolV1(), concurrencyLimit)
	debug := genericmux.NewPathRecorderMux("priority-and-fairness-debug")
	fc.Install(debug)
	return &flowControl{controller: fc, factory: factory, debug: debug, log: log,
		ensurer: &apfbootstrap.Ensurer{Client: client.FlowcontrolV1(), Interval: bootstrapInterval, Logger: log}}, nil
}

// start runs the informers, the controller and the ensurer until ctx ends; the returned
// func waits for them.
func (f *flowControl) start(ctx context.Context) func() {
	var wg sync.WaitGroup
	f.factory.Start(ctx.Done())
	wg.Go(func() {
		<-ctx.Done()
		f.factory.Shutdown()
	})
	wg.Go(func() {
		if err := f.controller.Run(ctx.Done()); err != nil && ctx.Err() == nil {
			f.log.Error("API priority and fairness controller stopped", "err", err)
		}
	})
	wg.Go(func() { genericfilters.StartPriorityAndFairnessWatermarkMaintenance(ctx.Done()) })
	wg.Go(func() {
		if err := f.ensurer.Run(ctx); err != nil {
			f.log.Error("API priority and fairness bootstrap configuration", "err", err)
		}
	})
	return wg.Wait
}

// flowControlMetrics serves the apiserver_flowcontrol_* families of component-base's
// global registry (where the library registers them).
func flowControlMetrics() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		all, err := legacyregistry.DefaultGatherer.Gather()
		out := all[:0]
		for _, mf := range all {
			if strings.HasPrefix(mf.GetName(), "apiserver_flowcontrol_") {
				out = append(out, mf)
			}
		}
		return out, err
	})
}
