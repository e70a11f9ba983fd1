//go:build e2esmall

// Package gates registers the metrics feature gates with Kubernetes' default feature gate,
// which the whole e2e suite gets from an import of the kubelet's server and the short suite
// does not. The instrumentation specs name one of them when their package is initialized,
// so this must run first: Go initializes packages in import-path order where their
// dependencies allow, and this path (…/small/gates in the temporary module) sorts before
// k8s.io/kubernetes.
package gates

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	metricsfeatures "k8s.io/component-base/metrics/features"
)

func init() {
	utilruntime.Must(metricsfeatures.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}
