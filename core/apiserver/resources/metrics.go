package resources

import (
	"context"
	"fmt"
	"net/http"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// MetricsSource holds the latest resource metrics of nodes and pods.
type MetricsSource interface {
	// NodeMetrics is node's usage; false while there is none (not scraped twice yet).
	NodeMetrics(node *corev1.Node) (*metricsv1beta1.NodeMetrics, bool)
	// PodMetrics is pod's usage; false while there is none.
	PodMetrics(pod *corev1.Pod) (*metricsv1beta1.PodMetrics, bool)
}

// Metrics returns metrics.k8s.io/v1beta1 as metrics-server serves it: nodes (NodeMetrics)
// and pods (PodMetrics), get and list only, computed on request from src and the
// Nodes and Pods read through stores. Lists take label selectors (on the node's or pod's
// labels) and field selectors on metadata.name and metadata.namespace; objects without
// metrics yet are left out of lists and are NotFound to get.
func Metrics(src MetricsSource, stores func(schema.GroupResource) *registry.Store) []Definition {
	gv := metricsv1beta1.SchemeGroupVersion
	readOnly := []string{"get", "list"}
	// Nothing is stored; the server still gives every resource a (here empty) storage.
	nodes := &registry.Resource{StoragePrefix: builtinPrefix(gv.Group, "nodes"), GroupVersion: gv, Name: "nodes", SingularName: "", Kind: "NodeMetrics", ListKind: "NodeMetricsList",
		Verbs: readOnly, NoTable: true, NoInitializers: true, NewFunc: func() runtime.Object { return &metricsv1beta1.NodeMetrics{} },
		NewListFunc: func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }, Strategy: &strategy{}}
	pods := &registry.Resource{StoragePrefix: builtinPrefix(gv.Group, "pods"), GroupVersion: gv, Name: "pods", SingularName: "", Kind: "PodMetrics", ListKind: "PodMetricsList",
		Namespaced: true, Verbs: readOnly, NoTable: true, NoInitializers: true, NewFunc: func() runtime.Object { return &metricsv1beta1.PodMetrics{} },
		NewListFunc: func() runtime.Object { return &metricsv1beta1.PodMetricsList{} }, Strategy: &strategy{}}
	nodeStore := func() *registry.Store { return stores(corev1.Resource("nodes")) }
	podStore := func() *registry.Store { return stores(corev1.Resource("pods")) }
	return []Definition{
		{Resource: nodes,
			GetHandler: computedGet(func(ctx context.Context, r endpoints.Request) (runtime.Object, error) {
				obj, err := nodeStore().Get(ctx, "", r.Name, &metav1.GetOptions{ResourceVersion: "0"})
				if apierrors.IsNotFound(err) {
					return nil, apierrors.NewNotFound(gv.WithResource("nodes").GroupResource(), r.Name)
				} else if err != nil {
					return nil, err
				}
				m, ok := src.NodeMetrics(obj.(*corev1.Node))
				if !ok {
					return nil, apierrors.NewNotFound(gv.WithResource("nodes").GroupResource(), r.Name)
				}
				return m, nil
			}),
			ListHandler: computedList(func(ctx context.Context, r endpoints.Request, opts *metav1.ListOptions, match func(metav1.Object) bool) (runtime.Object, error) {
				list, err := nodeStore().List(ctx, "", opts)
				if err != nil {
					return nil, err
				}
				out := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
				for i := range list.(*corev1.NodeList).Items {
					n := &list.(*corev1.NodeList).Items[i]
					if m, ok := src.NodeMetrics(n); ok && match(n) {
						out.Items = append(out.Items, *m)
					}
				}
				return out, nil
			})},
		{Resource: pods,
			GetHandler: computedGet(func(ctx context.Context, r endpoints.Request) (runtime.Object, error) {
				notFound := apierrors.NewNotFound(gv.WithResource("pods").GroupResource(), r.Namespace+"/"+r.Name)
				obj, err := podStore().Get(ctx, r.Namespace, r.Name, &metav1.GetOptions{ResourceVersion: "0"})
				if apierrors.IsNotFound(err) {
					return nil, notFound
				} else if err != nil {
					return nil, err
				}
				m, ok := src.PodMetrics(obj.(*corev1.Pod))
				if !ok {
					return nil, notFound
				}
				return m, nil
			}),
			ListHandler: computedList(func(ctx context.Context, r endpoints.Request, opts *metav1.ListOptions, match func(metav1.Object) bool) (runtime.Object, error) {
				list, err := podStore().List(ctx, r.Namespace, opts)
				if err != nil {
					return nil, err
				}
				out := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
				for i := range list.(*corev1.PodList).Items {
					p := &list.(*corev1.PodList).Items[i]
					if m, ok := src.PodMetrics(p); ok && match(p) {
						out.Items = append(out.Items, *m)
					}
				}
				return out, nil
			})},
	}
}

// computedGet serves a get with read, for resources computed on request rather than
// stored.
func computedGet(read func(ctx context.Context, r endpoints.Request) (runtime.Object, error)) func(*endpoints.Scope) endpoints.HandlerFunc {
	return func(s *endpoints.Scope) endpoints.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
			s.Custom(w, req, http.StatusOK, func(ctx context.Context, _ func(runtime.Object) error) (runtime.Object, error) {
				return read(ctx, r)
			})
		}
	}
}

// computedList serves a list with read: the label selector goes to read (metrics take
// it to the objects' list, from the watch cache), the field selector is matched on the
// computed objects' metadata, and a watch is refused, as metrics-server refuses it.
func computedList(read func(ctx context.Context, r endpoints.Request, opts *metav1.ListOptions, match func(metav1.Object) bool) (runtime.Object, error)) func(*endpoints.Scope) endpoints.HandlerFunc {
	return func(s *endpoints.Scope) endpoints.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
			s.Custom(w, req, http.StatusOK, func(ctx context.Context, _ func(runtime.Object) error) (runtime.Object, error) {
				opts := &metav1.ListOptions{}
				if err := s.Codecs.DecodeParams(req.URL.Query(), opts); err != nil {
					return nil, apierrors.NewBadRequest(err.Error())
				}
				if opts.Watch {
					return nil, apierrors.NewMethodNotSupported(schema.GroupResource{Group: s.Store.Resource.GroupVersion.Group, Resource: s.Store.Resource.Name}, "watch")
				}
				fieldSel := fields.Everything()
				if opts.FieldSelector != "" {
					var err error
					if fieldSel, err = fields.ParseSelector(opts.FieldSelector); err != nil {
						return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
					}
					for _, req := range fieldSel.Requirements() {
						if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
							return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
						}
					}
				}
				inner := &metav1.ListOptions{LabelSelector: opts.LabelSelector, ResourceVersion: "0"}
				return read(ctx, r, inner, func(o metav1.Object) bool {
					return fieldSel.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()})
				})
			})
		}
	}
}
