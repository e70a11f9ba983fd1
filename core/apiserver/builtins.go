package apiserver

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/api/initializers"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	"github.com/wasmplane/wasmplane/core/apiserver/resources"
	"github.com/wasmplane/wasmplane/core/apiserver/resources/admissionregistration"
	"github.com/wasmplane/wasmplane/core/apiserver/resources/apiextensions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtins are the built-in resources of a server built from cfg, wired to s: pods/log
// reads nodes from s, serviceaccounts/token looks objects up in s, and a namespace put
// in Terminating is remembered for NamespaceLifecycle.
func builtins(s *Server, cfg Config) []endpoints.Definition {
	bc := resources.BuiltinConfig{
		Kubelet: resources.KubeletConnection{TLS: cfg.KubeletClientTLS,
			GetNode: func(ctx context.Context, name string) (*corev1.Node, error) {
				obj, err := s.Lookup(ctx, corev1.Resource("nodes"), "", name)
				if err != nil {
					return nil, err
				}
				return obj.(*corev1.Node), nil
			}},
		TokenReviewer: cfg.TokenReviewer, Blobs: cfg.Blobs, Authorizer: cfg.Authorizer, RuleResolver: cfg.RuleResolver,
		NamespaceMarked:  func(name string) { s.nsMarked.mark(name, time.Now()) },
		ServiceAllocator: s.services,
		Stores:           s.Store,
	}
	if cfg.TokenRequest != nil {
		c := *cfg.TokenRequest
		c.Lookup = s.Lookup
		bc.TokenRequest = &c
	}
	all := append(resources.Builtins(bc), apiextensions.Definitions()...)
	if cfg.ComponentProbe != nil {
		all = append(all, resources.ComponentStatuses(cfg.ComponentProbe)...)
	}
	if s.resourceMetrics != nil {
		all = append(all, resources.Metrics(s.resourceMetrics.store, s.Store)...)
	}
	return append(all, admissionregistration.Definitions()...)
}

// namespaceLifecycle is the built-in NamespaceLifecycle admission plugin: no creates in a
// missing or terminating namespace.
type namespaceLifecycle struct{ s *Server }

func (namespaceLifecycle) Name() string { return "NamespaceLifecycle" }

func (n namespaceLifecycle) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Operation != admission.Create || a.Namespace == "" || a.Subresource != "" || a.Resource.Resource == "namespaces" {
		return nil
	}
	store := n.s.Store(corev1.Resource("namespaces"))
	nsObj, err := store.Get(ctx, "", a.Namespace, &metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		// The cache may lag a namespace created a moment ago; ask etcd before refusing.
		nsObj, err = store.Get(ctx, "", a.Namespace, nil)
	}
	if err == nil && nsObj.(*corev1.Namespace).Status.Phase != corev1.NamespaceTerminating && n.s.nsMarked.recent(a.Namespace, time.Now()) {
		// Marked Terminating a moment ago: the cache may not show it yet.
		nsObj, err = store.Get(ctx, "", a.Namespace, nil)
	}
	if err != nil {
		return err
	}
	if ns := nsObj.(*corev1.Namespace); ns.Status.Phase == corev1.NamespaceTerminating {
		return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns.Name))
	}
	return nil
}

// initializerRegistry computes pending initializers from the InitializerConfigurations.
type initializerRegistry struct {
	s       *Server
	waiting func(gvr schema.GroupVersionResource, namespace, name string)
}

// Pending implements registry.Initializers: configurations in name order, each
// initializer once.
func (r *initializerRegistry) Pending(ctx context.Context, gvr schema.GroupVersionResource) []string {
	if admission.IsAdmissionConfiguration(gvr.GroupResource()) {
		return nil
	}
	store := r.s.Store(initializers.SchemeGroupVersion.WithResource("initializerconfigurations").GroupResource())
	if store == nil {
		return nil
	}
	// Most clusters have no initializer configuration: the watch cache says so without a
	// list being built on every create (the list below reads the same cache).
	if c, ok := store.Storage.(objectStatser); ok {
		if n, _, ready := c.Stats(); ready && n == 0 {
			return nil
		}
	}
	list, err := store.List(ctx, "", &metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil
	}
	items := list.(*initializers.InitializerConfigurationList).Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	var out []string
	for _, c := range items {
		for _, in := range c.Initializers {
			if slices.Contains(out, in.Name) {
				continue
			}
			for _, rule := range in.Rules {
				if rule.Matches(gvr) {
					out = append(out, in.Name)
					break
				}
			}
		}
	}
	return out
}

// Waiting implements registry.Initializers.
func (r *initializerRegistry) Waiting(gvr schema.GroupVersionResource, namespace, name string) {
	if r.waiting != nil {
		r.waiting(gvr, namespace, name)
	}
}

// EnsureSystemNamespaces creates the namespaces Kubernetes always has.
func (s *Server) EnsureSystemNamespaces(ctx context.Context) error {
	store := s.Store(corev1.Resource("namespaces"))
	for _, name := range resources.SystemNamespaces {
		_, err := store.Create(ctx, "", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, registry.WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}
