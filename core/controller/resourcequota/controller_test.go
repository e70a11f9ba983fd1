package resourcequota

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

func TestSyncRecomputesUsage(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m")}}}}}
	done := running.DeepCopy()
	done.Name, done.Status.Phase = "b", corev1.PodSucceeded
	other := running.DeepCopy()
	other.Name, other.Namespace = "c", "elsewhere"
	claim := func(name, class string, size string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
		if class != "" {
			c.Spec.VolumeAttributesClassName = &class
		}
		return c
	}
	gold, silver, plain := claim("gold", "gold", "1Gi"), claim("silver", "silver", "2Gi"), claim("plain", "", "4Gi")
	cmMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}

	tests := []struct {
		name  string
		hard  corev1.ResourceList
		used  corev1.ResourceList // stale status before the sync
		scope []corev1.ResourceQuotaScope
		sel   *corev1.ScopeSelector
		want  corev1.ResourceList
	}{
		{name: "counts and compute", hard: rl("pods", "5", "count/pods", "5", "requests.cpu", "2", "configmaps", "3", "count/deployments.apps", "2"),
			used: rl("pods", "4"), want: rl("pods", "1", "count/pods", "2", "requests.cpu", "250m", "configmaps", "1", "count/deployments.apps", "0")},
		{name: "scoped quota counts matching pods only", hard: rl("pods", "5", "configmaps", "3"), scope: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort},
			want: rl("pods", "0", "configmaps", "0")},
		{name: "volume attributes class scope counts the claims it selects", hard: rl("persistentvolumeclaims", "5", "requests.storage", "10Gi", "pods", "3"),
			sel: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"gold"}}}},
			want: rl("persistentvolumeclaims", "1", "requests.storage", "1Gi", "pods", "0")},
		{name: "unscoped quota counts every claim", hard: rl("requests.storage", "10Gi"), want: rl("requests.storage", "7Gi")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
				Spec: corev1.ResourceQuotaSpec{Hard: tt.hard, Scopes: tt.scope, ScopeSelector: tt.sel}, Status: corev1.ResourceQuotaStatus{Used: tt.used}}
			client := fake.NewClientset(q, running, done, other, gold, silver, plain)
			client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
				{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "Pod"}, {Name: "configmaps", Namespaced: true, Kind: "ConfigMap"}}},
			}
			scheme := runtime.NewScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			md := metadatafake.NewSimpleMetadataClient(scheme, cmMeta)
			c, err := New(client, md, informers.NewSharedInformerFactory(client, 0), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Now: func() time.Time { return time.Now() }})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.sync(context.Background(), "ns"); err != nil {
				t.Fatal(err)
			}
			got, err := client.CoreV1().ResourceQuotas("ns").Get(context.Background(), "q", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Used) != len(tt.want) || len(got.Status.Hard) != len(tt.hard) {
				t.Fatalf("status = %+v, want used %+v", got.Status, tt.want)
			}
			for n, v := range tt.want {
				if g := got.Status.Used[n]; g.Cmp(v) != 0 {
					t.Errorf("used %s = %s, want %s", n, g.String(), v.String())
				}
			}
		})
	}
}

// TestClaimClassChangeRecounts: a claim whose volume attributes class changes is
// recounted at once by a quota scoped to the class (no resync).
func TestClaimClassChangeRecounts(t *testing.T) {
	gold, silver := "gold", "silver"
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("5")},
		ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{gold}}}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: &gold}}
	client := fake.NewClientset(q, pvc)
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(client, metadatafake.NewSimpleMetadataClient(scheme), factory, Options{Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 1) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	waitUsed := func(want string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().ResourceQuotas("ns").Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			used, ok := got.Status.Used[corev1.ResourcePersistentVolumeClaims]
			return ok && used.Cmp(resource.MustParse(want)) == 0, nil
		})
		if err != nil {
			t.Fatalf("claims used never %s: %v", want, err)
		}
	}
	waitUsed("1")
	pvc.Spec.VolumeAttributesClassName = &silver
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed("0")
}
