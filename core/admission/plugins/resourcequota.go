package plugins

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/quota"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// QuotaAccessor reads and charges ResourceQuotas.
type QuotaAccessor interface {
	// ListQuotas returns the quotas of namespace; fresh asks for a read of the latest
	// state rather than a cached one.
	ListQuotas(ctx context.Context, namespace string, fresh bool) ([]corev1.ResourceQuota, error)
	// UpdateQuotaStatus writes q.Status if q.ResourceVersion is still the stored one, and
	// returns a Conflict error otherwise.
	UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) error
}

// DefaultQuotaRetries bounds how often a charge is retried after a conflicting write by
// another API server or the quota controller.
const DefaultQuotaRetries = 10

// ResourceQuota is Kubernetes' ResourceQuota plugin: a create that would take a quota's
// usage past its hard limit is refused, and an admitted one is charged by writing the
// quota's status.used with optimistic concurrency before the object is stored, so that
// concurrent creates can never overshoot. Dry runs are checked but not charged.
type ResourceQuota struct {
	// Quotas reads and charges quotas.
	Quotas QuotaAccessor
	// Retries bounds conflict retries (0 = DefaultQuotaRetries).
	Retries int
	// Now is the clock (nil = time.Now).
	Now func() time.Time

	// locks serialize this server's charges per namespace, so that conflicts come only
	// from other writers and retries stay rare.
	mu    sync.Mutex
	locks map[string]*nsLock
}

type nsLock struct {
	mu   sync.Mutex
	refs int
}

// Name implements admission.Validator.
func (*ResourceQuota) Name() string { return "ResourceQuota" }

func (q *ResourceQuota) lock(ns string) func() {
	q.mu.Lock()
	if q.locks == nil {
		q.locks = map[string]*nsLock{}
	}
	l := q.locks[ns]
	if l == nil {
		l = &nsLock{}
		q.locks[ns] = l
	}
	l.refs++
	q.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		q.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(q.locks, ns)
		}
		q.mu.Unlock()
	}
}

func (q *ResourceQuota) now() time.Time {
	if q.Now != nil {
		return q.Now()
	}
	return time.Now()
}

// Validate checks and charges the quotas of the request's namespace.
func (q *ResourceQuota) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Namespace == "" || a.Subresource != "" || a.Operation != admission.Create || a.Object == nil {
		return nil
	}
	quotas, err := q.Quotas.ListQuotas(ctx, a.Namespace, false)
	if err != nil {
		return fmt.Errorf("listing resource quotas of %s: %w", a.Namespace, err)
	}
	if len(quotas) == 0 {
		return nil
	}
	gr := a.Resource.GroupResource()
	usage := quota.Usage(gr, a.Object, q.now())
	unlock := q.lock(a.Namespace)
	defer unlock()
	// The cached list may trail; the charge's precondition catches that, and the retry
	// reads the latest state.
	retries := q.Retries
	if retries == 0 {
		retries = DefaultQuotaRetries
	}
	charged := map[string]bool{}
	for attempt := 0; ; attempt++ {
		pending, err := q.check(a, quotas, usage, charged)
		if err != nil || len(pending) == 0 || a.DryRun {
			return err
		}
		var lastErr error
		for i := range pending {
			err := q.Quotas.UpdateQuotaStatus(ctx, &pending[i])
			switch {
			case err == nil, apierrors.IsNotFound(err):
				// A quota deleted meanwhile no longer limits anything.
				charged[pending[i].Name] = true
			case apierrors.IsConflict(err):
				lastErr = err
			default:
				return fmt.Errorf("charging resource quota %s/%s: %w", a.Namespace, pending[i].Name, err)
			}
		}
		if lastErr == nil {
			return nil
		}
		if attempt >= retries {
			return lastErr
		}
		// Another server or the controller wrote the quota: back off a little, re-read.
		select {
		case <-ctx.Done():
			return fmt.Errorf("charging resource quota in %s: %w", a.Namespace, ctx.Err())
		case <-time.After(time.Duration(rand.IntN(5*(attempt+1))+1) * time.Millisecond):
		}
		if quotas, err = q.Quotas.ListQuotas(ctx, a.Namespace, true); err != nil {
			return fmt.Errorf("listing resource quotas of %s: %w", a.Namespace, err)
		}
	}
}

// check returns the quotas (not yet charged) whose usage the request raises, with their
// new status.used, or the Forbidden error of the first quota it would exceed.
func (q *ResourceQuota) check(a *admission.Attributes, quotas []corev1.ResourceQuota, usage corev1.ResourceList, charged map[string]bool) ([]corev1.ResourceQuota, error) {
	gr := a.Resource.GroupResource()
	pod, _ := a.Object.(*corev1.Pod)
	var out []corev1.ResourceQuota
	for i := range quotas {
		rq := &quotas[i]
		if charged[rq.Name] || !quota.Matches(rq, gr, a.Object) {
			continue
		}
		restricted := quota.Matching(gr, rq.Status.Hard)
		if len(restricted) == 0 {
			continue
		}
		if pod != nil && gr == podsResource {
			if err := quota.PodConstraints(restricted, pod); err != nil {
				return nil, forbidden(a, fmt.Errorf("failed quota: %s: %w", rq.Name, err))
			}
		}
		var unknown []string
		for _, n := range restricted {
			if _, ok := rq.Status.Used[n]; !ok {
				unknown = append(unknown, string(n))
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return nil, forbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", rq.Name, strings.Join(unknown, ",")))
		}
		requested := quota.Mask(usage, restricted)
		if len(requested) == 0 {
			continue
		}
		newUsed := quota.Add(rq.Status.Used, requested)
		if exceeded := quota.Exceeded(quota.Mask(newUsed, quota.NamesOf(requested)), rq.Status.Hard); len(exceeded) > 0 {
			return nil, forbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s", rq.Name,
				quota.PrettyPrint(quota.Mask(requested, exceeded)), quota.PrettyPrint(quota.Mask(rq.Status.Used, exceeded)),
				quota.PrettyPrint(quota.Mask(rq.Status.Hard, exceeded))))
		}
		next := *rq.DeepCopy()
		next.Status.Used = newUsed
		out = append(out, next)
	}
	return out, nil
}
