package admission_test

import (
	"context"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

func TestBuiltinServiceAccount(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
		AutomountServiceAccountToken: ptr.To(false)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		sa        string
		automount *bool
		wantSA    string
		wantMount bool
		wantErr   string
	}{
		{name: "default account, token mounted", wantSA: "default", wantMount: true},
		{name: "missing account", sa: "ghost", wantErr: `pods "missing-account" is forbidden: error looking up service account ` + ns + `/ghost: serviceaccount "ghost" not found`},
		{name: "pod opts out", automount: ptr.To(false), wantSA: "default"},
		{name: "account opts out", sa: "quiet", wantSA: "quiet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(strings.ReplaceAll(tt.name, " ", "-"))
			p.Name = strings.ReplaceAll(p.Name, ",", "")
			p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken = tt.sa, tt.automount
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "example.com/init:1"}}
			got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if tt.wantErr != "" {
				wantStatus(t, err, 403, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.ServiceAccountName != tt.wantSA {
				t.Errorf("serviceAccountName = %q, want %q", got.Spec.ServiceAccountName, tt.wantSA)
			}
			var vol *corev1.Volume
			for i := range got.Spec.Volumes {
				if strings.HasPrefix(got.Spec.Volumes[i].Name, "kube-api-access-") {
					vol = &got.Spec.Volumes[i]
				}
			}
			if (vol != nil) != tt.wantMount {
				t.Fatalf("token volume present = %v, want %v (volumes %+v)", vol != nil, tt.wantMount, got.Spec.Volumes)
			}
			if vol == nil {
				return
			}
			src := vol.Projected.Sources
			if len(vol.Name) != len("kube-api-access-")+5 || len(src) != 3 || src[0].ServiceAccountToken == nil ||
				*src[0].ServiceAccountToken.ExpirationSeconds != 3607 || src[0].ServiceAccountToken.Path != "token" ||
				src[1].ConfigMap == nil || src[1].ConfigMap.Name != "kube-root-ca.crt" ||
				src[2].DownwardAPI == nil || src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("token volume = %+v", vol)
			}
			for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
				found := false
				for _, m := range c.VolumeMounts {
					found = found || (m.Name == vol.Name && m.MountPath == tokenPath && m.ReadOnly)
				}
				if !found {
					t.Errorf("container %s does not mount the token: %+v", c.Name, c.VolumeMounts)
				}
			}
		})
	}
}

func TestBuiltinDefaultTolerationSeconds(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, true)
	ns := builtinNamespace(t, cs)
	p := simplePod("tolerant")
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(7))}}
	got, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{corev1.TaintNodeUnreachable: 7, corev1.TaintNodeNotReady: 300}
	if len(got.Spec.Tolerations) != 2 {
		t.Fatalf("tolerations = %+v", got.Spec.Tolerations)
	}
	for _, tol := range got.Spec.Tolerations {
		if tol.Effect != corev1.TaintEffectNoExecute || tol.TolerationSeconds == nil || *tol.TolerationSeconds != want[tol.Key] {
			t.Errorf("toleration %+v, want %d seconds", tol, want[tol.Key])
		}
	}
}

func TestBuiltinPriority(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	pcs := cs.SchedulingV1().PriorityClasses()
	for name, value := range map[string]int32{"system-cluster-critical": 2000000000, "system-node-critical": 2000001000} {
		pc, err := pcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil || pc.Value != value {
			t.Fatalf("system class %s: %v %+v", name, err, pc)
		}
	}
	wantStatus(t, pcs.Delete(ctx, "system-node-critical", metav1.DeleteOptions{}), 403, "this is a system priority class and cannot be deleted")
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000, PreemptionPolicy: ptr.To(corev1.PreemptNever)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "normal"}, Value: 10, GlobalDefault: true}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "also-default"}, Value: 5, GlobalDefault: true}, metav1.CreateOptions{})
	wantStatus(t, err, 403, "PriorityClass normal is already marked as default. Only one default can exist")
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "too-high"}, Value: 1000000001}, metav1.CreateOptions{})
	wantStatus(t, err, 422, "maximum allowed value of a user defined priority is 1000000000")
	_, err = pcs.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 1}, metav1.CreateOptions{})
	wantStatus(t, err, 422, "priority class names with 'system-' prefix are reserved for system use only")
	high, err := pcs.Get(ctx, "high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	high.Value = 2000
	_, err = pcs.Update(ctx, high, metav1.UpdateOptions{})
	wantStatus(t, err, 422, "value: Forbidden: may not be changed in an update.")

	tests := []struct {
		name       string
		class      string
		priority   *int32
		wantClass  string
		wantValue  int32
		wantPolicy corev1.PreemptionPolicy
		wantErr    string
	}{
		{name: "named", class: "high", wantClass: "high", wantValue: 1000, wantPolicy: corev1.PreemptNever},
		{name: "default", wantClass: "normal", wantValue: 10, wantPolicy: corev1.PreemptLowerPriority},
		{name: "system", class: "system-node-critical", wantClass: "system-node-critical", wantValue: 2000001000, wantPolicy: corev1.PreemptLowerPriority},
		{name: "missing", class: "ghost", wantErr: `pods "missing" is forbidden: no PriorityClass with name ghost was found`},
		{name: "own-priority", class: "high", priority: ptr.To(int32(1)), wantErr: "the integer value of priority (1) must not be provided in pod spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(tt.name)
			p.Spec.PriorityClassName, p.Spec.Priority = tt.class, tt.priority
			got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if tt.wantErr != "" {
				wantStatus(t, err, 403, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.PriorityClassName != tt.wantClass || got.Spec.Priority == nil || *got.Spec.Priority != tt.wantValue ||
				got.Spec.PreemptionPolicy == nil || *got.Spec.PreemptionPolicy != tt.wantPolicy {
				t.Errorf("class %q priority %v policy %v", got.Spec.PriorityClassName, got.Spec.Priority, got.Spec.PreemptionPolicy)
			}
		})
	}
}

func TestBuiltinLimitRanger(t *testing.T) {
	s := testserver.StartAPI(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	q := resource.MustParse
	_, err := cs.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Min: corev1.ResourceList{corev1.ResourceCPU: q("2")}, Max: corev1.ResourceList{corev1.ResourceCPU: q("1")}}}}}, metav1.CreateOptions{})
	wantStatus(t, err, 422, "min value 2 is greater than max value 1")
	lr, err := cs.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max:            corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("512Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Kubernetes' LimitRange defaulting: the default limit falls back to max.
	if d := lr.Spec.Limits[0].Default[corev1.ResourceCPU]; d.Cmp(q("1")) != 0 {
		t.Fatalf("default limit = %s, want 1", d.String())
	}
	tests := []struct {
		name    string
		res     corev1.ResourceRequirements
		wantReq corev1.ResourceList
		wantLim corev1.ResourceList
		wantErr string
	}{
		{name: "defaulted", wantReq: corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("512Mi")},
			wantLim: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("512Mi")}},
		{name: "too-big", res: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q("2")}},
			wantErr: `pods "too-big" is forbidden: maximum cpu usage per Container is 1, but limit is 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := simplePod(tt.name)
			p.Spec.Containers[0].Resources = tt.res
			got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if tt.wantErr != "" {
				wantStatus(t, err, 403, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := got.Spec.Containers[0].Resources
			for n, v := range tt.wantReq {
				if g := r.Requests[n]; g.Cmp(v) != 0 {
					t.Errorf("request %s = %s, want %s", n, g.String(), v.String())
				}
			}
			for n, v := range tt.wantLim {
				if g := r.Limits[n]; g.Cmp(v) != 0 {
					t.Errorf("limit %s = %s, want %s", n, g.String(), v.String())
				}
			}
			if got.Status.QOSClass != corev1.PodQOSBurstable {
				t.Errorf("qosClass = %s, want Burstable (computed after LimitRanger's defaults)", got.Status.QOSClass)
			}
			if !strings.HasPrefix(got.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: ") {
				t.Errorf("annotations = %v", got.Annotations)
			}
		})
	}
}

// TestBuiltinResourceQuota runs the whole plane (the quota controller fills and
// replenishes status) and checks atomic charging under concurrency.
func TestBuiltinResourceQuota(t *testing.T) {
	s := testserver.Start(t)
	cs := s.Clientset(t, false)
	ctx := context.Background()
	ns := builtinNamespace(t, cs)
	_, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("-1"), "widgets": resource.MustParse("1")}}}, metav1.CreateOptions{})
	wantStatus(t, err, 422, "must be a standard resource for quota")
	if _, err := cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10"), "count/configmaps": resource.MustParse("50")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used := func(ctx context.Context) (int64, error) {
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		u, ok := q.Status.Used[corev1.ResourcePods]
		if !ok {
			return -1, nil
		}
		return u.Value(), nil
	}
	waitfor.Condition(t, 20*time.Second, "the controller to fill the quota status", func(ctx context.Context) (bool, error) {
		n, err := used(ctx)
		return n == 0, err
	})

	// A dry run is checked but charges nothing.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if n, err := used(ctx); err != nil || n != 0 {
		t.Fatalf("used after dry run = %d (%v), want 0", n, err)
	}

	// 20 concurrent creates against pods=10 admit exactly 10.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []string
	denied := 0
	for range 20 {
		wg.Go(func() {
			p := simplePod("")
			p.GenerateName = "race-"
			got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted = append(admitted, got.Name)
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10"):
				denied++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	if len(admitted) != 10 || denied != 10 {
		t.Fatalf("admitted %d, denied %d; want 10 and 10", len(admitted), denied)
	}
	if n, err := used(ctx); err != nil || n != 10 {
		t.Fatalf("used = %d (%v), want 10", n, err)
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, simplePod("dry-over"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	wantStatus(t, err, 403, `exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10`)

	// kubectl get quota's columns.
	tbl := &metav1.Table{}
	if err := cs.CoreV1().RESTClient().Get().Namespace(ns).Resource("resourcequotas").Name("pods").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(tbl); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	// The namespace's one ConfigMap, if the root CA publisher has written it yet, is
	// kube-root-ca.crt.
	if strings.Join(cols, " ") != "Name Age Request Limit" || len(tbl.Rows) != 1 ||
		!slices.Contains([]any{"count/configmaps: 0/50, pods: 10/10", "count/configmaps: 1/50, pods: 10/10"}, tbl.Rows[0].Cells[2]) {
		t.Fatalf("table columns %v rows %+v", cols, tbl.Rows)
	}

	// Deleting pods releases their quota through the controller.
	for _, name := range admitted[:3] {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.Condition(t, 20*time.Second, "usage to drop to 7", func(ctx context.Context) (bool, error) {
		n, err := used(ctx)
		return n == 7, err
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, simplePod("after-release"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create after release: %v", err)
	}
	// Object counts: configmaps are charged too.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := q.Status.Used["count/configmaps"]; c.Value() < 1 {
		t.Fatalf("count/configmaps used = %s", c.String())
	}
	t.Run("services", func(t *testing.T) { testServiceQuota(t, s) })
}
