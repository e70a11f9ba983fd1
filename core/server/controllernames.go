package server

import (
	"fmt"
	"slices"
	"strings"
)

// controllerNames are kube-controller-manager v1.37's names of the controllers wasmplane
// runs, with the short aliases kube-controller-manager still accepts, so that one
// --controllers value means the same to both.
var controllerNames = map[string]string{
	"certificatesigningrequest-approving-controller": "csrapproving",
	"certificatesigningrequest-signing-controller":   "csrsigning",
	"clusterrole-aggregation-controller":             "clusterrole-aggregation",
	"cronjob-controller":                             "cronjob",
	"daemonset-controller":                           "daemonset",
	"deployment-controller":                          "deployment",
	"disruption-controller":                          "disruption",
	"endpoints-controller":                           "endpoint",
	"endpointslice-controller":                       "endpointslice",
	"endpointslice-mirroring-controller":             "endpointslicemirroring",
	"garbage-collector-controller":                   "garbagecollector",
	"horizontal-pod-autoscaler-controller":           "horizontalpodautoscaling",
	"job-controller":                                 "job",
	"namespace-controller":                           "namespace",
	"node-lifecycle-controller":                      "nodelifecycle",
	"persistentvolume-binder-controller":             "persistentvolume-binder",
	"pod-garbage-collector-controller":               "podgc",
	"replicaset-controller":                          "replicaset",
	"replicationcontroller-controller":               "replicationcontroller",
	"resourcequota-controller":                       "resourcequota",
	"root-ca-certificate-publisher-controller":       "root-ca-cert-publisher",
	"serviceaccount-controller":                      "serviceaccount",
	"statefulset-controller":                         "statefulset",
	"ttl-after-finished-controller":                  "ttl-after-finished",
	"validatingadmissionpolicy-status-controller":    "validatingadmissionpolicy-status",
}

// ControllerSelection is a --controllers list as kube-controller-manager reads it: "*"
// turns on every controller, "name" turns one on, "-name" off; the first entry naming a
// controller wins. Names are kube-controller-manager's, or their short aliases
// ("job", "statefulset"). An empty selection is "*".
type ControllerSelection []string

// Validate rejects names no controller has.
func (s ControllerSelection) Validate() error {
	for _, e := range s {
		name := strings.TrimPrefix(e, "-")
		if e == "*" || canonical(name) != "" {
			continue
		}
		known := make([]string, 0, len(controllerNames))
		for n := range controllerNames {
			known = append(known, n)
		}
		slices.Sort(known)
		return fmt.Errorf("%q is not a known controller (%s, their short aliases, or *)", e, strings.Join(known, ", "))
	}
	return nil
}

// Enabled tells whether the controller of kube-controller-manager name runs.
func (s ControllerSelection) Enabled(name string) bool {
	if len(s) == 0 {
		return true
	}
	star := false
	for _, e := range s {
		switch {
		case e == "*":
			star = true
		case canonical(e) == name:
			return true
		case strings.HasPrefix(e, "-") && canonical(e[1:]) == name:
			return false
		}
	}
	return star
}

// canonical is the kube-controller-manager name of a name or alias ("" if none).
func canonical(name string) string {
	if _, ok := controllerNames[name]; ok {
		return name
	}
	for full, alias := range controllerNames {
		if alias == name {
			return full
		}
	}
	return ""
}
