package quota

import (
	"testing"
	"time"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

func TestUsage(t *testing.T) {
	now := time.Now()
	podGR := schema.GroupResource{Resource: "pods"}
	withRes := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}},
		}}}
	extended := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		"example.com/dongle": resource.MustParse("2"), "hugepages-2Mi": resource.MustParse("4Mi"), "kubernetes.io/native": resource.MustParse("1")}}}}}}
	done := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, DeletionGracePeriodSeconds: ptr.To(int64(30))}}
	tests := []struct {
		name string
		gr   schema.GroupResource
		obj  runtime.Object
		want string
	}{
		{name: "pod with init max", gr: podGR, obj: withRes, want: "count/pods=1,cpu=2,limits.memory=1Gi,pods=1,requests.cpu=2"},
		{name: "extended resources and huge pages", gr: podGR, obj: extended, want: "count/pods=1,hugepages-2Mi=4Mi,pods=1,requests.example.com/dongle=2,requests.hugepages-2Mi=4Mi"},
		{name: "terminal pod counts as object only", gr: podGR, obj: done, want: "count/pods=1"},
		{name: "pod stuck terminating", gr: podGR, obj: stuck, want: "count/pods=1"},
		{name: "secret", gr: schema.GroupResource{Resource: "secrets"}, obj: &corev1.Secret{}, want: "count/secrets=1,secrets=1"},
		{name: "grouped", gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, obj: &corev1.Secret{}, want: "count/deployments.apps=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrettyPrint(Usage(tt.gr, tt.obj, now)); got != tt.want {
				t.Errorf("usage = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestChargesPods(t *testing.T) {
	tests := []struct {
		name corev1.ResourceName
		want bool
	}{
		{"requests.cpu", true},
		{"pods", true},
		{"requests.example.com/dongle", true},
		{"example.com/dongle", false}, // extended resources only under requests.
		{"limits.example.com/dongle", false},
		{"requests.kubernetes.io/native", false},
		{"hugepages-2Mi", true},
		{"requests.hugepages-2Mi", true},
		{"count/pods", true},
		{"secrets", false},
	}
	for _, tt := range tests {
		if got := ChargesPods(tt.name); got != tt.want {
			t.Errorf("ChargesPods(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
	hard := corev1.ResourceList{"requests.example.com/dongle": resource.MustParse("3"), "secrets": resource.MustParse("1"), "cpu": resource.MustParse("1")}
	if got := Matching(schema.GroupResource{Resource: "pods"}, hard); len(got) != 2 || got[0] != "cpu" || got[1] != "requests.example.com/dongle" {
		t.Errorf("Matching(pods) = %v, want [cpu requests.example.com/dongle]", got)
	}
}

func TestResourceOf(t *testing.T) {
	tests := []struct {
		name corev1.ResourceName
		want schema.GroupResource
		ok   bool
	}{
		{"pods", schema.GroupResource{Resource: "pods"}, true},
		{"count/deployments.apps", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"count/widgets.example.com", schema.GroupResource{Group: "example.com", Resource: "widgets"}, true},
		{"requests.cpu", schema.GroupResource{}, false},
	}
	for _, tt := range tests {
		got, ok := ResourceOf(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ResourceOf(%s) = %v %v", tt.name, got, ok)
		}
	}
}

func TestMatchesScopes(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	be := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, PriorityClassName: "high"}}
	term := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To(int64(10)), Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	q := func(scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Scopes: scopes}}
	}
	sel := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}}}
	// Claims by the VolumeAttributesClasses they refer to.
	pvcGR := schema.GroupResource{Resource: "persistentvolumeclaims"}
	plain := &corev1.PersistentVolumeClaim{}
	gold := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To("gold")}}
	moving := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeAttributesClassName: ptr.To("gold")},
		Status: corev1.PersistentVolumeClaimStatus{CurrentVolumeAttributesClassName: ptr.To("silver"),
			ModifyVolumeStatus: &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "bronze"}}}
	vac := func(op corev1.ScopeSelectorOperator, values ...string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopeVolumeAttributesClass, Operator: op, Values: values}}}}}
	}
	tests := []struct {
		name string
		q    *corev1.ResourceQuota
		gr   schema.GroupResource
		obj  runtime.Object
		want bool
	}{
		{"unscoped matches anything", q(), schema.GroupResource{Resource: "secrets"}, &corev1.Secret{}, true},
		{"scoped never matches non-pods", q(corev1.ResourceQuotaScopeBestEffort), schema.GroupResource{Resource: "secrets"}, &corev1.Secret{}, false},
		{"best effort", q(corev1.ResourceQuotaScopeBestEffort), podGR, be, true},
		{"not best effort", q(corev1.ResourceQuotaScopeNotBestEffort), podGR, be, false},
		{"terminating", q(corev1.ResourceQuotaScopeTerminating), podGR, term, true},
		{"not terminating", q(corev1.ResourceQuotaScopeNotTerminating), podGR, term, false},
		{"priority class in", sel, podGR, be, true},
		{"priority class not in", sel, podGR, term, false},
		{"claims: pod scopes never match", q(corev1.ResourceQuotaScopeBestEffort), pvcGR, gold, false},
		{"claims: class exists", q(corev1.ResourceQuotaScopeVolumeAttributesClass), pvcGR, gold, true},
		{"claims: class exists, none", q(corev1.ResourceQuotaScopeVolumeAttributesClass), pvcGR, plain, false},
		{"claims: class in, asked for", vac(corev1.ScopeSelectorOpIn, "gold"), pvcGR, gold, true},
		{"claims: class in, other", vac(corev1.ScopeSelectorOpIn, "silver"), pvcGR, gold, false},
		{"claims: class in, none", vac(corev1.ScopeSelectorOpIn, "gold"), pvcGR, plain, false},
		{"claims: class in, the current one", vac(corev1.ScopeSelectorOpIn, "silver"), pvcGR, moving, true},
		{"claims: class in, the target one", vac(corev1.ScopeSelectorOpIn, "bronze"), pvcGR, moving, true},
		{"claims: class not in, one of several outside", vac(corev1.ScopeSelectorOpNotIn, "gold"), pvcGR, moving, true},
		{"claims: class not in, the only one", vac(corev1.ScopeSelectorOpNotIn, "gold"), pvcGR, gold, false},
		{"claims: class not in, none", vac(corev1.ScopeSelectorOpNotIn, "gold"), pvcGR, plain, true},
		{"claims: class does not exist, none", vac(corev1.ScopeSelectorOpDoesNotExist), pvcGR, plain, true},
		{"claims: class does not exist, one", vac(corev1.ScopeSelectorOpDoesNotExist), pvcGR, gold, false},
		{"claims: a claim as another resource", vac(corev1.ScopeSelectorOpIn, "gold"), podGR, gold, false},
	}
	for _, tt := range tests {
		if got := Matches(tt.q, tt.gr, tt.obj); got != tt.want {
			t.Errorf("%s: Matches = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPluginMemory covers what a WasmPlugin costs in wasmplane.io/plugin-memory, on
// create and on update.
func TestPluginMemory(t *testing.T) {
	plugin := func(l *wasmv1.Limits) *wasmv1.WasmPlugin {
		return &wasmv1.WasmPlugin{Spec: wasmv1.WasmPluginSpec{Limits: l}}
	}
	if !Names(WasmPlugins).Has(PluginMemory) || !Names(WasmPlugins).Has("count/wasmplugins.wasmplane.io") {
		t.Fatalf("names of wasmplugins: %v", sets.List(Names(WasmPlugins)))
	}
	tests := []struct {
		name string
		l    *wasmv1.Limits
		want string
	}{
		{"server defaults", nil, "8Gi"},
		{"explicit", &wasmv1.Limits{MemoryPages: 1024, MaxInstances: 4}, "256Mi"},
		{"instances default", &wasmv1.Limits{MemoryPages: 16}, "64Mi"},
	}
	for _, tt := range tests {
		u := Usage(WasmPlugins, plugin(tt.l), time.Now())
		got, n := u[PluginMemory], u["count/wasmplugins.wasmplane.io"]
		if got.Cmp(resource.MustParse(tt.want)) != 0 || n.Value() != 1 {
			t.Errorf("%s: usage %v, want %s and one count", tt.name, u, tt.want)
		}
	}
	small, big := plugin(&wasmv1.Limits{MemoryPages: 64, MaxInstances: 2}), plugin(&wasmv1.Limits{MemoryPages: 1024, MaxInstances: 4})
	if g := UpdateUsage(WasmPlugins, small, big)[PluginMemory]; g.Cmp(resource.MustParse("248Mi")) != 0 {
		t.Errorf("growth %s, want 248Mi", g.String())
	}
	if g := UpdateUsage(WasmPlugins, big, small); g != nil {
		t.Errorf("shrinking charged %v", g)
	}
	if g := UpdateUsage(schema.GroupResource{Resource: "configmaps"}, nil, nil); g != nil {
		t.Errorf("configmap update charged %v", g)
	}
}

func TestPVCUsage(t *testing.T) {
	gold := "gold"
	claim := func(class *string, request, allocated string) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}
		if request != "" {
			p.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}
		}
		if allocated != "" {
			p.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(allocated)}
		}
		return p
	}
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want map[corev1.ResourceName]string
	}{
		{"no class", claim(nil, "1Gi", ""), map[corev1.ResourceName]string{"requests.storage": "1Gi"}},
		{"empty class", claim(ptr.To(""), "1Gi", ""), map[corev1.ResourceName]string{"requests.storage": "1Gi"}},
		{"gold", claim(&gold, "1Gi", ""), map[corev1.ResourceName]string{"requests.storage": "1Gi",
			"gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "gold.storageclass.storage.k8s.io/requests.storage": "1Gi"}},
		{"allocated larger", claim(nil, "1Gi", "2Gi"), map[corev1.ResourceName]string{"requests.storage": "2Gi"}},
		{"allocated smaller", claim(nil, "2Gi", "1Gi"), map[corev1.ResourceName]string{"requests.storage": "2Gi"}},
		{"no request", claim(&gold, "", ""), map[corev1.ResourceName]string{"gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PVCUsage(tt.pvc)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for n, q := range tt.want {
				if g, ok := got[n]; !ok || g.Cmp(resource.MustParse(q)) != 0 {
					t.Errorf("%s = %v, want %s", n, got[n], q)
				}
				if !ChargesPVCs(n) {
					t.Errorf("ChargesPVCs(%s) = false", n)
				}
			}
		})
	}
	for _, n := range []corev1.ResourceName{"persistentvolumeclaims", "storageclass.storage.k8s.io/requests.storage", "gold.storageclass.storage.k8s.io/pods", "requests.cpu"} {
		if ChargesPVCs(n) {
			t.Errorf("ChargesPVCs(%s) = true", n)
		}
	}
	// A resize charges only the storage it adds; a claim's count is not charged again.
	grow := UpdateUsage(pvcsGR, claim(&gold, "1Gi", ""), claim(&gold, "3Gi", ""))
	two := resource.MustParse("2Gi")
	if a, b := grow["requests.storage"], grow["gold.storageclass.storage.k8s.io/requests.storage"]; len(grow) != 2 || a.Cmp(two) != 0 || b.Cmp(two) != 0 {
		t.Errorf("resize usage = %v", grow)
	}
}

func TestClaimUsage(t *testing.T) {
	exactly := func(class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
	}
	tests := []struct {
		name     string
		requests []resourcev1.DeviceRequest
		want     map[string]int64 // device class -> devices
	}{
		{"one device, defaulted", []resourcev1.DeviceRequest{exactly("gold", "", 0)}, map[string]int64{"gold": 1}},
		{"exact count", []resourcev1.DeviceRequest{exactly("gold", resourcev1.DeviceAllocationModeExactCount, 3)}, map[string]int64{"gold": 3}},
		{"all is the worst case", []resourcev1.DeviceRequest{exactly("gold", resourcev1.DeviceAllocationModeAll, 0)}, map[string]int64{"gold": resourcev1.AllocationResultsMaxSize}},
		{"two requests add up", []resourcev1.DeviceRequest{exactly("gold", "", 2), exactly("gold", "", 1), exactly("silver", "", 1)}, map[string]int64{"gold": 3, "silver": 1}},
		{"alternatives: the most of each class", []resourcev1.DeviceRequest{{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "a", DeviceClassName: "gold", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
			{Name: "b", DeviceClassName: "gold", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			{Name: "c", DeviceClassName: "silver", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 4}}}},
			map[string]int64{"gold": 2, "silver": 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClaimUsage(&resourcev1.ResourceClaim{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: tt.requests}}})
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for class, n := range tt.want {
				name := corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
				if q := got[name]; q.Value() != n || !ChargesClaims(name) {
					t.Errorf("%s = %v (charged: %v), want %d", name, got[name], ChargesClaims(name), n)
				}
			}
		})
	}
	if ChargesClaims(corev1.ResourceName(corev1.ResourceClaimsPerClass)) || ChargesClaims("requests.storage") {
		t.Error("ChargesClaims accepts a name without a device class")
	}
	// The admission path: a claim costs its count and its devices.
	u := Usage(claimsGR, &resourcev1.ResourceClaim{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactly("gold", "", 0)}}}}, time.Now())
	if c, d := u["count/resourceclaims.resource.k8s.io"], u["gold.deviceclass.resource.k8s.io/devices"]; c.Value() != 1 || d.Value() != 1 {
		t.Errorf("usage = %v", u)
	}
}
