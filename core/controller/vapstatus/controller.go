// Package vapstatus is Kubernetes' ValidatingAdmissionPolicy status controller: it
// type-checks each new generation of a policy's CEL expressions against the schemas of
// the kinds the policy matches (and of its paramKind), with k8s.io/apiserver's
// TypeChecker, and writes the warnings to status.typeChecking with the generation they
// are for. It talks to the API only through client-go.
package vapstatus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller writes ValidatingAdmissionPolicies' type-checking status.
type Controller struct {
	client  kubernetes.Interface
	lister  admissionlisters.ValidatingAdmissionPolicyLister
	synced  cache.InformerSynced
	checker *validating.TypeChecker
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
}

// New returns a controller fed by factory's ValidatingAdmissionPolicy informer; mapper
// finds the resources the policies match. Schemas are read from the server's OpenAPI v3.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, mapper meta.RESTMapper, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := factory.Admissionregistration().V1().ValidatingAdmissionPolicies()
	c := &Controller{
		client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		checker: &validating.TypeChecker{SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: client.Discovery()}, RestMapper: mapper},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "validatingadmissionpolicystatus"}),
		log: log.With("controller", "validatingadmissionpolicystatus"),
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) },
	}); err != nil {
		return nil, fmt.Errorf("adding ValidatingAdmissionPolicy handler: %w", err)
	}
	return c, nil
}

// Run type-checks policies with workers goroutines until ctx ends, then waits for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, []cache.InformerSynced{c.synced}, c.sync, c.log, "validatingadmissionpolicy")
}

func (c *Controller) sync(ctx context.Context, name string) error {
	policy, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading validatingadmissionpolicy %s: %w", name, err)
	}
	// A generation already checked is not checked again: the schemas a check read may
	// have changed since, but Kubernetes' controller does not look again either.
	if policy.Generation <= policy.Status.ObservedGeneration {
		return nil
	}
	warnings := c.checker.Check(policy)
	updated := policy.DeepCopy()
	updated.Status.ObservedGeneration = policy.Generation
	updated.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: warnings}
	if _, err := c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the type-checking status of validatingadmissionpolicy %s: %w", name, err)
	}
	c.log.Debug("type-checked", "validatingadmissionpolicy", name, "generation", policy.Generation, "warnings", len(warnings))
	return nil
}
