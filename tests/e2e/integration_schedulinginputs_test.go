package e2e

import (
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// schedulingInputCases are the resources kube-scheduler's informers list and watch.
func schedulingInputCases() []resourceCase {
	storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	return []resourceCase{
		crudCase("services", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.Service, *corev1.ServiceList] {
			return cs.CoreV1().Services(ns)
		}, func(n string) *corev1.Service {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": n}, Ports: []corev1.ServicePort{{Port: 80}}}}
		}),
		crudCase("replicationcontrollers", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.ReplicationController, *corev1.ReplicationControllerList] {
			return cs.CoreV1().ReplicationControllers(ns)
		}, func(n string) *corev1.ReplicationController {
			tmpl := podTemplate(n)
			return &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.ReplicationControllerSpec{
				Replicas: ptr.To[int32](1), Selector: map[string]string{"app": n}, Template: &tmpl}}
		}),
		crudCase("persistentvolumes", false, func(cs kubernetes.Interface, _ string) crudClient[*corev1.PersistentVolume, *corev1.PersistentVolumeList] {
			return cs.CoreV1().PersistentVolumes()
		}, func(n string) *corev1.PersistentVolume {
			return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.PersistentVolumeSpec{
				Capacity: storage, AccessModes: rwo,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + n}}}}
		}),
		crudCase("persistentvolumeclaims", false, func(cs kubernetes.Interface, ns string) crudClient[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
			return cs.CoreV1().PersistentVolumeClaims(ns)
		}, func(n string) *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: rwo, Resources: corev1.VolumeResourceRequirements{Requests: storage}}}
		}),
		crudCase("statefulsets", false, func(cs kubernetes.Interface, ns string) crudClient[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return cs.AppsV1().StatefulSets(ns)
		}, func(n string) *appsv1.StatefulSet {
			return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}, Template: podTemplate(n)}}
		}),
		crudCase("poddisruptionbudgets", false, func(cs kubernetes.Interface, ns string) crudClient[*policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudgetList] {
			return cs.PolicyV1().PodDisruptionBudgets(ns)
		}, func(n string) *policyv1.PodDisruptionBudget {
			return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}}}}
		}),
		crudCase("storageclasses", false, func(cs kubernetes.Interface, _ string) crudClient[*storagev1.StorageClass, *storagev1.StorageClassList] {
			return cs.StorageV1().StorageClasses()
		}, func(n string) *storagev1.StorageClass {
			return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: n}, Provisioner: "example.com/disk"}
		}),
		crudCase("csidrivers", false, func(cs kubernetes.Interface, _ string) crudClient[*storagev1.CSIDriver, *storagev1.CSIDriverList] {
			return cs.StorageV1().CSIDrivers()
		}, func(n string) *storagev1.CSIDriver {
			return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}),
		crudCase("csinodes", false, func(cs kubernetes.Interface, _ string) crudClient[*storagev1.CSINode, *storagev1.CSINodeList] {
			return cs.StorageV1().CSINodes()
		}, func(n string) *storagev1.CSINode {
			return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: storagev1.CSINodeSpec{
				Drivers: []storagev1.CSINodeDriver{{Name: "disk.example.com", NodeID: "node-1"}}}}
		}),
		crudCase("csistoragecapacities", false, func(cs kubernetes.Interface, ns string) crudClient[*storagev1.CSIStorageCapacity, *storagev1.CSIStorageCapacityList] {
			return cs.StorageV1().CSIStorageCapacities(ns)
		}, func(n string) *storagev1.CSIStorageCapacity {
			return &storagev1.CSIStorageCapacity{ObjectMeta: metav1.ObjectMeta{Name: n}, StorageClassName: "standard", Capacity: ptr.To(resource.MustParse("10Gi"))}
		}),
		crudCase("volumeattachments", false, func(cs kubernetes.Interface, _ string) crudClient[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList] {
			return cs.StorageV1().VolumeAttachments()
		}, func(n string) *storagev1.VolumeAttachment {
			return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: storagev1.VolumeAttachmentSpec{
				Attacher: "disk.example.com", NodeName: "node-1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}}}
		}),
		crudCase("resourceclaims", false, func(cs kubernetes.Interface, ns string) crudClient[*resourcev1.ResourceClaim, *resourcev1.ResourceClaimList] {
			return cs.ResourceV1().ResourceClaims(ns)
		}, func(n string) *resourcev1.ResourceClaim {
			return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}}
		}),
		crudCase("resourceslices", false, func(cs kubernetes.Interface, _ string) crudClient[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList] {
			return cs.ResourceV1().ResourceSlices()
		}, func(n string) *resourcev1.ResourceSlice {
			return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: resourcev1.ResourceSliceSpec{
				Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1}, NodeName: ptr.To("node-1"),
				Devices: []resourcev1.Device{{Name: "gpu-0"}}}}
		}),
		crudCase("deviceclasses", false, func(cs kubernetes.Interface, _ string) crudClient[*resourcev1.DeviceClass, *resourcev1.DeviceClassList] {
			return cs.ResourceV1().DeviceClasses()
		}, func(n string) *resourcev1.DeviceClass {
			return &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: n}}
		}),
		crudCase("devicetaintrules", false, func(cs kubernetes.Interface, _ string) crudClient[*resourcev1.DeviceTaintRule, *resourcev1.DeviceTaintRuleList] {
			return cs.ResourceV1().DeviceTaintRules()
		}, func(n string) *resourcev1.DeviceTaintRule {
			return &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: resourcev1.DeviceTaintRuleSpec{
				Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
		}),
	}
}

// TestSchedulingInputsStatus writes the status of a claim, a PDB and a stateful set
// through their status subresources, and checks the main resource cannot change it.
func TestSchedulingInputsStatus(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "schedinputs")
	ctx := ctxFor(t)
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pvc: %v", err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Fatalf("created pvc: phase %q volumeMode %v", pvc.Status.Phase, pvc.Spec.VolumeMode)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("update pvc status: %v (%v)", err, pvc.Status.Phase)
	}
	pvc.Status.Phase = corev1.ClaimLost
	if pvc, err = cs.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("update pvc: %v, status %v, want it unchanged (Bound)", err, pvc.Status.Phase)
	}
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pdb: %v", err)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, pdb.Name, types.MergePatchType,
		[]byte(`{"status":{"disruptionsAllowed":2,"expectedPods":4}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patch pdb status: %v", err)
	}
	if got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{}); err != nil || got.Status.DisruptionsAllowed != 2 {
		t.Fatalf("pdb status: %v (%+v)", err, got.Status)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(-1))}}, metav1.CreateOptions{}); err == nil {
		t.Fatal("create pdb with minAvailable -1: accepted")
	}
}
