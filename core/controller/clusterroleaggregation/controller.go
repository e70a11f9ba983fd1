// Package clusterroleaggregation is Kubernetes' ClusterRole aggregation controller: a
// ClusterRole with an aggregationRule gets, as its rules, the rules of every ClusterRole
// its selectors match (this is how admin, edit and view grow when an extension labels a
// role rbac.authorization.k8s.io/aggregate-to-edit). It talks to the API only through
// client-go.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller keeps aggregated ClusterRoles' rules up to date.
type Controller struct {
	client kubernetes.Interface
	lister rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	log    *slog.Logger
}

// New returns a controller fed by factory's ClusterRole informer.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := factory.Rbac().V1().ClusterRoles()
	c := &Controller{
		client: client, lister: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterroleaggregation"}),
		log: log.With("controller", "clusterroleaggregation"),
	}
	// Any change to any ClusterRole may change what an aggregated role should hold, so
	// every aggregated role is looked at again.
	enqueue := func(any) { c.enqueueAggregated() }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding ClusterRole handler: %w", err)
	}
	return c, nil
}

// Run syncs aggregated ClusterRoles with workers goroutines until ctx ends, then waits
// for them.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Run(ctx, c.queue, workers, []cache.InformerSynced{c.synced}, c.sync, c.log, "clusterrole")
}

func (c *Controller) enqueueAggregated() {
	roles, err := c.lister.List(labels.Everything())
	if err != nil {
		c.log.Error("listing clusterroles", "err", err)
		return
	}
	for _, r := range roles {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading clusterrole %s: %w", name, err)
	}
	if role.AggregationRule == nil {
		return nil
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing clusterroles: %w", err)
	}
	rules, err := AggregatedRules(role, all)
	if err != nil {
		return fmt.Errorf("aggregating clusterrole %s: %w", name, err)
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating clusterrole %s: %w", name, err)
	}
	c.log.Info("aggregated rules", "clusterrole", name, "rules", len(rules))
	return nil
}

// AggregatedRules returns the rules role should hold: those of every other ClusterRole in
// all matching one of its aggregationRule selectors, in name order, each rule once.
func AggregatedRules(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	if role.AggregationRule == nil {
		return role.Rules, nil
	}
	selectors := make([]labels.Selector, 0, len(role.AggregationRule.ClusterRoleSelectors))
	for i := range role.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("selector %d: %w", i, err)
		}
		selectors = append(selectors, s)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var rules []rbacv1.PolicyRule
	for _, r := range sorted {
		if r.Name == role.Name {
			continue
		}
		matched := false
		for _, s := range selectors {
			if s.Matches(labels.Set(r.Labels)) {
				matched = true
				break
			}
		}
		if !matched {
			continue
		}
		for _, rule := range r.Rules {
			if !containsRule(rules, rule) {
				rules = append(rules, rule)
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for i := range rules {
		if apiequality.Semantic.DeepEqual(rules[i], r) {
			return true
		}
	}
	return false
}
