package server

import (
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/admission/adapter"
	"github.com/wasmplane/wasmplane/core/admission/policy"
	"github.com/wasmplane/wasmplane/core/admission/webhook"
	"github.com/wasmplane/wasmplane/core/apiserver"
	"github.com/wasmplane/wasmplane/core/authz"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// newPolicies builds the CEL admission policies' source on the server's loopback
// client; *srv is read only once requests flow.
func newPolicies(cfg *rest.Config, scheme *runtime.Scheme, srv **apiserver.Server, authorizer authz.Authorizer, log *slog.Logger) (*policy.Policies, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admission policies: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admission policies: %w", err)
	}
	return policy.New(policy.Config{
		Client: client, Dynamic: dyn, Authorizer: policy.Authorizer(authorizer), Logger: log,
		Objects: adapter.ObjectInterfaces{Scheme: scheme, Equivalents: lateEquivalents{srv},
			Defaulter: func(obj runtime.Object) { (*srv).DefaultObject(obj) }},
	})
}

// newWebhooks builds the admission webhooks' source on the server's loopback client;
// *srv is read only once requests flow, after the server is built.
func newWebhooks(cfg *rest.Config, scheme *runtime.Scheme, srv **apiserver.Server, log *slog.Logger) (*webhook.Webhooks, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("admission webhooks: %w", err)
	}
	return webhook.New(webhook.Config{
		Client: client, Scheme: scheme, Logger: log,
		Equivalents: lateEquivalents{srv},
		Defaulter:   func(obj runtime.Object) { (*srv).DefaultObject(obj) },
	})
}

// lateEquivalents asks the server, once it exists, which resources are equivalent.
type lateEquivalents struct{ srv **apiserver.Server }

func (l lateEquivalents) EquivalentResourcesFor(r schema.GroupVersionResource, sub string) []schema.GroupVersionResource {
	return (*l.srv).EquivalentResources().EquivalentResourcesFor(r, sub)
}

func (l lateEquivalents) KindFor(r schema.GroupVersionResource, sub string) schema.GroupVersionKind {
	return (*l.srv).EquivalentResources().KindFor(r, sub)
}
