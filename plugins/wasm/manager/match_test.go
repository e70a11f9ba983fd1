package manager

import (
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestMatches covers how a plugin's rules, selectors and scope select admission requests.
func TestMatches(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"env": "dev"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "leaving", DeletionTimestamp: &metav1.Time{}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	} {
		if err := idx.Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manager{nsLister: corelisters.NewNamespaceLister(idx)}
	pods := wasmv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}
	req := func(group, resource, sub, ns string, op admission.Operation, labels map[string]string) *admission.Attributes {
		a := &admission.Attributes{Resource: schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource},
			Subresource: sub, Namespace: ns, Operation: op}
		obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
		if op == admission.Delete {
			a.OldObject = obj
		} else {
			a.Object = obj
		}
		return a
	}
	everything := wasmv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Operations: []wasmv1.Operation{"*"}}
	as := func(user string, a *admission.Attributes) *admission.Attributes {
		a.User.Name = user
		return a
	}
	podIn := func(ns string) *admission.Attributes { return req("", "pods", "", ns, admission.Create, nil) }
	tests := []struct {
		name      string
		namespace string // the plugin's; "" for a ClusterWasmPlugin
		rules     []wasmv1.Rule
		nsSel     *metav1.LabelSelector
		objSel    *metav1.LabelSelector
		a         *admission.Attributes
		want      bool
	}{
		{name: "no rules match everything", a: req("apps", "deployments", "", "prod", admission.Update, nil), want: true},
		{name: "resource matches", rules: []wasmv1.Rule{pods}, a: podIn("prod"), want: true},
		{name: "other resource", rules: []wasmv1.Rule{pods}, a: req("", "configmaps", "", "prod", admission.Create, nil)},
		{name: "other group", rules: []wasmv1.Rule{pods}, a: req("apps", "pods", "", "prod", admission.Create, nil)},
		{name: "subresource needs its own rule", rules: []wasmv1.Rule{pods}, a: req("", "pods", "status", "prod", admission.Update, nil)},
		{name: "pods/status", rules: []wasmv1.Rule{{Resources: []string{"pods/status"}}}, a: req("", "pods", "status", "prod", admission.Update, nil), want: true},
		{name: "*/status", rules: []wasmv1.Rule{{Resources: []string{"*/status"}}}, a: req("", "nodes", "status", "", admission.Update, nil), want: true},
		{name: "pods/*", rules: []wasmv1.Rule{{Resources: []string{"pods/*"}}}, a: req("", "pods", "binding", "prod", admission.Create, nil), want: true},
		{name: "* is not subresources", rules: []wasmv1.Rule{{Resources: []string{"*"}}}, a: req("", "pods", "exec", "prod", admission.Connect, nil)},
		{name: "*/* is everything", rules: []wasmv1.Rule{{APIGroups: []string{"*"}, Resources: []string{"*/*"}}}, a: req("", "pods", "exec", "prod", admission.Connect, nil), want: true},
		{name: "operation listed", rules: []wasmv1.Rule{{Resources: []string{"pods"}, Operations: []wasmv1.Operation{"CREATE", "UPDATE"}}}, a: podIn("prod"), want: true},
		{name: "operation not listed", rules: []wasmv1.Rule{{Resources: []string{"pods"}, Operations: []wasmv1.Operation{"UPDATE"}}}, a: podIn("prod")},
		{name: "operation *", rules: []wasmv1.Rule{{Resources: []string{"pods"}, Operations: []wasmv1.Operation{"*"}}}, a: req("", "pods", "", "prod", admission.Delete, nil), want: true},
		{name: "scope Namespaced refuses cluster objects", rules: []wasmv1.Rule{{Resources: []string{"*"}, Scope: "Namespaced"}}, a: req("", "nodes", "", "", admission.Create, nil)},
		{name: "scope Cluster refuses namespaced objects", rules: []wasmv1.Rule{{Resources: []string{"*"}, Scope: "Cluster"}}, a: podIn("prod")},
		{name: "scope Cluster", rules: []wasmv1.Rule{{Resources: []string{"*"}, Scope: "Cluster"}}, a: req("", "nodes", "", "", admission.Create, nil), want: true},
		{name: "second rule matches", rules: []wasmv1.Rule{{Resources: []string{"configmaps"}}, pods}, a: podIn("prod"), want: true},
		{name: "tenant plugin in its namespace", namespace: "dev", rules: []wasmv1.Rule{pods}, a: podIn("dev"), want: true},
		{name: "tenant plugin in another namespace", namespace: "dev", rules: []wasmv1.Rule{pods}, a: podIn("prod")},
		{name: "tenant plugin and cluster objects", namespace: "dev", a: req("", "nodes", "", "", admission.Create, nil)},
		{name: "namespace selector matches", nsSel: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, a: podIn("prod"), want: true},
		{name: "namespace selector does not match", nsSel: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, a: podIn("dev")},
		{name: "namespace selector and unknown namespace", nsSel: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, a: podIn("gone")},
		{name: "namespace selector and cluster objects", nsSel: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, a: req("", "nodes", "", "", admission.Create, nil)},
		{name: "object selector matches", objSel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, a: req("", "pods", "", "prod", admission.Create, map[string]string{"app": "web"}), want: true},
		{name: "object selector does not match", objSel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, a: req("", "pods", "", "prod", admission.Create, map[string]string{"app": "db"})},
		{name: "object selector on delete reads the old object", objSel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, a: req("", "pods", "", "prod", admission.Delete, map[string]string{"app": "web"}), want: true},
		{name: "plugins never see WasmPlugins", rules: []wasmv1.Rule{everything}, a: req("wasmplane.io", "wasmplugins", "", "prod", admission.Delete, nil)},
		{name: "plugins never see WasmPlugin status", rules: []wasmv1.Rule{everything}, a: req("wasmplane.io", "wasmplugins", "status", "prod", admission.Update, nil)},
		{name: "plugins never see ClusterWasmPlugins", rules: []wasmv1.Rule{everything}, a: req("wasmplane.io", "clusterwasmplugins", "", "", admission.Update, nil)},
		{name: "plugins never see WasmModules", rules: []wasmv1.Rule{everything}, a: req("wasmplane.io", "wasmmodules", "", "", admission.Create, nil)},
		{name: "plugins never see InitializerConfigurations", rules: []wasmv1.Rule{everything}, a: req("admissionregistration.k8s.io", "initializerconfigurations", "", "", admission.Create, nil)},
		{name: "plugins never see webhook configurations", rules: []wasmv1.Rule{everything}, a: req("admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", admission.Delete, nil)},
		{name: "plugins never see admission policies", rules: []wasmv1.Rule{everything}, a: req("admissionregistration.k8s.io", "mutatingadmissionpolicybindings", "", "", admission.Create, nil)},
		{name: "tenant plugin and the admin's delete", namespace: "dev", rules: []wasmv1.Rule{everything}, a: as("system:admin", req("", "pods", "", "dev", admission.Delete, nil)), want: true},
		{name: "tenant plugin and the control plane's delete", namespace: "dev", rules: []wasmv1.Rule{everything}, a: as("system:apiserver", req("", "pods", "", "dev", admission.Delete, nil))},
		{name: "cluster plugin and the control plane's delete", rules: []wasmv1.Rule{everything}, a: as("system:apiserver", req("", "pods", "", "dev", admission.Delete, nil)), want: true},
		{name: "tenant plugin and the control plane's create", namespace: "dev", rules: []wasmv1.Rule{everything}, a: as("system:apiserver", podIn("dev")), want: true},
		{name: "tenant plugin and a delete in its terminating namespace", namespace: "leaving", rules: []wasmv1.Rule{everything}, a: as("system:admin", req("", "pods", "", "leaving", admission.Delete, nil))},
		{name: "tenant plugin and an update in its terminating namespace", namespace: "leaving", rules: []wasmv1.Rule{everything}, a: as("alice", req("", "pods", "", "leaving", admission.Update, nil)), want: true},
		{name: "cluster plugin and a delete in a terminating namespace", rules: []wasmv1.Rule{everything}, a: as("system:admin", req("", "pods", "", "leaving", admission.Delete, nil)), want: true},
		{name: "empty selectors match everything", nsSel: &metav1.LabelSelector{}, objSel: &metav1.LabelSelector{}, a: podIn("dev"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &entry{namespace: tt.namespace, spec: wasmv1.WasmPluginSpec{Rules: tt.rules}}
			var err error
			if e.nsSelector, err = selector(tt.nsSel); err != nil {
				t.Fatal(err)
			}
			if e.objSelect, err = selector(tt.objSel); err != nil {
				t.Fatal(err)
			}
			if got := m.matches(e, tt.a); got != tt.want {
				t.Fatalf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}
