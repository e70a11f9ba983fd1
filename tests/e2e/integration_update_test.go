package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// updateCase is one resource's PUT without metadata.resourceVersion, and its PUT of an
// object that does not exist.
type updateCase struct {
	name string
	// create stores the object name; update PUTs it with the label changed=true and
	// no resourceVersion, returning the label and resourceVersion of the answer.
	create func(ctx context.Context, cs kubernetes.Interface, ns, name string) (rv string, err error)
	update func(ctx context.Context, cs kubernetes.Interface, ns, name string) (changed, rv string, err error)
	get    func(ctx context.Context, cs kubernetes.Interface, ns, name string) (changed, rv string, err error)
	// unconditional and createOnUpdate are Kubernetes' AllowUnconditionalUpdate and
	// AllowCreateOnUpdate of the resource's strategy.
	unconditional, createOnUpdate bool
}

func labelled(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"changed": "true"}}
}

func updateCases() []updateCase {
	return []updateCase{
		{name: "configmaps", unconditional: true,
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
				o, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				o, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: labelled(name, ns), Data: map[string]string{"k": "v"}}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				return changedOf(cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}))
			}},
		// Helm v3 records each release in a Secret it replaces without a resourceVersion.
		{name: "secrets", unconditional: true,
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
				o, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				o, err := cs.CoreV1().Secrets(ns).Update(ctx, &corev1.Secret{ObjectMeta: labelled(name, ns), Data: map[string][]byte{"k": []byte("v")}}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				return changedOf(cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}))
			}},
		{name: "clusterroles", unconditional: true, createOnUpdate: true,
			create: func(ctx context.Context, cs kubernetes.Interface, _, name string) (string, error) {
				o, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, _, name string) (string, string, error) {
				o, err := cs.RbacV1().ClusterRoles().Update(ctx, &rbacv1.ClusterRole{ObjectMeta: labelled(name, "")}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, _, name string) (string, string, error) {
				return changedOf(cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}))
			}},
		{name: "limitranges", unconditional: true, createOnUpdate: true,
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
				o, err := cs.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				o, err := cs.CoreV1().LimitRanges(ns).Update(ctx, &corev1.LimitRange{ObjectMeta: labelled(name, ns)}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				return changedOf(cs.CoreV1().LimitRanges(ns).Get(ctx, name, metav1.GetOptions{}))
			}},
		// Leader election depends on a lease's update naming the revision it replaces.
		{name: "leases", unconditional: false, createOnUpdate: true,
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
				o, err := cs.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				o, err := cs.CoordinationV1().Leases(ns).Update(ctx, &coordinationv1.Lease{ObjectMeta: labelled(name, ns),
					Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me")}}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				return changedOf(cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}))
			}},
		{name: "poddisruptionbudgets", unconditional: false,
			create: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
				o, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}}, metav1.CreateOptions{})
				return rvOf(o, err)
			},
			update: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				o, err := cs.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: labelled(name, ns),
					Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}}, metav1.UpdateOptions{})
				return changedOf(o, err)
			},
			get: func(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, string, error) {
				return changedOf(cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{}))
			}},
	}
}

func rvOf[T metav1.Object](o T, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return o.GetResourceVersion(), nil
}

func changedOf[T metav1.Object](o T, err error) (string, string, error) {
	if err != nil {
		return "", "", err
	}
	return o.GetLabels()["changed"], o.GetResourceVersion(), nil
}

// TestUnconditionalUpdate: a PUT without metadata.resourceVersion replaces the stored
// object where Kubernetes' strategy allows it, and is refused with Kubernetes' 422
// (leaving the object as it was) where it does not.
func TestUnconditionalUpdate(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "unconditional")
	for _, tc := range updateCases() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			name := "u-" + strings.TrimSuffix(tc.name, "s")
			rv, err := tc.create(ctx, cs, ns, name)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			changed, newRV, err := tc.update(ctx, cs, ns, name)
			if tc.unconditional {
				if err != nil {
					t.Fatalf("update without resourceVersion: %v", err)
				}
				if changed != "true" || newRV == rv || newRV == "" {
					t.Fatalf("update answered label %q resourceVersion %q (was %q), want the new revision", changed, newRV, rv)
				}
				return
			}
			var status apierrors.APIStatus
			if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
				t.Fatalf("update without resourceVersion: %v, want 422 Invalid", err)
			}
			st := status.Status()
			if st.Code != http.StatusUnprocessableEntity || st.Details == nil || len(st.Details.Causes) != 1 ||
				st.Details.Causes[0].Field != "metadata.resourceVersion" || !strings.Contains(st.Message, "must be specified for an update") {
				t.Fatalf("refusal is %+v, want Kubernetes' metadata.resourceVersion cause", st)
			}
			if changed, got, err := tc.get(ctx, cs, ns, name); err != nil || changed != "" || got != rv {
				t.Fatalf("after the refusal: label %q resourceVersion %q err %v, want the object untouched at %q", changed, got, err, rv)
			}
		})
	}
}

// TestCreateOnUpdate: a PUT of a missing object creates it where Kubernetes' strategy
// allows it and answers 404 where it does not.
func TestCreateOnUpdate(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "createonupdate")
	for _, tc := range updateCases() {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			name := "c-" + strings.TrimSuffix(tc.name, "s")
			changed, rv, err := tc.update(ctx, cs, ns, name)
			if !tc.createOnUpdate {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("PUT of a missing object: %v, want 404 NotFound", err)
				}
				if _, _, err := tc.get(ctx, cs, ns, name); !apierrors.IsNotFound(err) {
					t.Fatalf("after the refused PUT, get: %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PUT of a missing object: %v", err)
			}
			if changed != "true" || rv == "" {
				t.Fatalf("PUT answered label %q resourceVersion %q, want the created object", changed, rv)
			}
			if changed, got, err := tc.get(ctx, cs, ns, name); err != nil || changed != "true" || got != rv {
				t.Fatalf("get after create-on-update: label %q resourceVersion %q err %v, want %q", changed, got, err, rv)
			}
		})
	}
}
