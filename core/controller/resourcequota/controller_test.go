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
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/utils/ptr"
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
	claim := func(name, size string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{
			VolumeAttributesClassName: class, Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
	}
	gold, plain := claim("gold", "1Gi", ptr.To("gold")), claim("plain", "2Gi", nil)
	cmMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}

	tests := []struct {
		name  string
		hard  corev1.ResourceList
		used  corev1.ResourceList // stale status before the sync
		scope []corev1.ResourceQuotaScope
		want  corev1.ResourceList
	}{
		{name: "counts and compute", hard: rl("pods", "5", "count/pods", "5", "requests.cpu", "2", "configmaps", "3", "count/deployments.apps", "2"),
			used: rl("pods", "4"), want: rl("pods", "1", "count/pods", "2", "requests.cpu", "250m", "configmaps", "1", "count/deployments.apps", "0")},
		{name: "scoped quota counts matching pods only", hard: rl("pods", "5", "configmaps", "3"), scope: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort},
			want: rl("pods", "0", "configmaps", "0")},
		{name: "volume attributes class scope counts the claims of a class", hard: rl("persistentvolumeclaims", "5", "requests.storage", "10Gi", "configmaps", "3"),
			scope: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeVolumeAttributesClass},
			want:  rl("persistentvolumeclaims", "1", "requests.storage", "1Gi", "configmaps", "0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
				Spec: corev1.ResourceQuotaSpec{Hard: tt.hard, Scopes: tt.scope}, Status: corev1.ResourceQuotaStatus{Used: tt.used}}
			client := fake.NewClientset(q, running, done, other, gold, plain)
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
