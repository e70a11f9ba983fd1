package persistentvolume

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func volume(name, size string, mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"disk": name}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}}}}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func claim(name, size string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(""), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	for _, m := range mutate {
		m(c)
	}
	return c
}

// statusKeepsSpec makes the fake keep the spec on a status update, as the API server
// does (the fake stores the whole object).
func statusKeepsSpec(client *fake.Clientset) {
	client.PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		switch in := a.(k8stesting.UpdateAction).GetObject().(type) {
		case *corev1.PersistentVolumeClaim:
			cur, err := client.Tracker().Get(a.GetResource(), in.Namespace, in.Name)
			if err != nil {
				return true, nil, err
			}
			out := cur.(*corev1.PersistentVolumeClaim).DeepCopy()
			out.Status = in.Status
			return true, out, client.Tracker().Update(a.GetResource(), out, in.Namespace)
		case *corev1.PersistentVolume:
			cur, err := client.Tracker().Get(a.GetResource(), "", in.Name)
			if err != nil {
				return true, nil, err
			}
			out := cur.(*corev1.PersistentVolume).DeepCopy()
			out.Status = in.Status
			return true, out, client.Tracker().Update(a.GetResource(), out, "")
		}
		return false, nil, nil
	})
}

func TestBinder(t *testing.T) {
	gold := "gold"
	tests := []struct {
		name    string
		objects []runtime.Object
		claim   string
		volume  string // the volume the claim ends bound to; "" = stays Pending
		check   func(t *testing.T, pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim)
	}{
		{name: "smallest volume that fits", claim: "c", volume: "medium",
			objects: []runtime.Object{claim("c", "1Gi"), volume("big", "10Gi"), volume("medium", "2Gi"), volume("tiny", "500Mi")},
			check: func(t *testing.T, pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) {
				if pv.Annotations[AnnBoundByController] != "yes" || c.Annotations[AnnBoundByController] != "yes" || c.Annotations[AnnBindCompleted] != "yes" {
					t.Errorf("annotations: volume %v, claim %v", pv.Annotations, c.Annotations)
				}
				if c.Status.Capacity.Storage().String() != "2Gi" || len(c.Status.AccessModes) != 1 {
					t.Errorf("claim status %+v, want the volume's capacity and access modes", c.Status)
				}
				if pv.Spec.ClaimRef.UID != c.UID || pv.Status.LastPhaseTransitionTime == nil {
					t.Errorf("volume %+v %+v", pv.Spec.ClaimRef, pv.Status)
				}
			}},
		{name: "claim names its volume (with a volume attributes class)", claim: "c", volume: "v2",
			objects: []runtime.Object{
				claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.VolumeName, c.Spec.VolumeAttributesClassName = "v2", &gold
					c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "v2"}}
				}),
				volume("v1", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = &gold }),
				volume("v2", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = &gold })},
			check: func(t *testing.T, pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) {
				if _, set := c.Annotations[AnnBoundByController]; set || pv.Annotations[AnnBoundByController] != "yes" {
					t.Errorf("a claim bound by its user is not marked bound by the controller: claim %v, volume %v", c.Annotations, pv.Annotations)
				}
				if ptr.Deref(c.Status.CurrentVolumeAttributesClassName, "") != gold {
					t.Errorf("current volume attributes class %v, want gold", c.Status.CurrentVolumeAttributesClassName)
				}
			}},
		{name: "volume names its claim", claim: "c", volume: "reserved",
			objects: []runtime.Object{claim("c", "1Gi"), volume("free", "1Gi"),
				volume("reserved", "5Gi", func(pv *corev1.PersistentVolume) {
					pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c"}
				})}},
		{name: "access mode, class, attributes class, selector and size must fit", claim: "c",
			objects: []runtime.Object{
				claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
				}),
				volume("rwo", "5Gi"),
				volume("other-class", "5Gi", func(pv *corev1.PersistentVolume) {
					pv.Spec.AccessModes, pv.Spec.StorageClassName = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, "fast"
				}),
				volume("other-vac", "5Gi", func(pv *corev1.PersistentVolume) {
					pv.Spec.AccessModes, pv.Spec.VolumeAttributesClassName = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, &gold
				}),
				volume("small", "100Mi", func(pv *corev1.PersistentVolume) {
					pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
				})}},
		{name: "a class that provisions is left to its provisioner", claim: "c",
			objects: []runtime.Object{
				claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("csi") }),
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi"}, Provisioner: "ebs.csi.aws.com"},
				volume("v", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "csi" })}},
		{name: "a no-provisioner class binds at once", claim: "c", volume: "v",
			objects: []runtime.Object{
				claim("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("local") }),
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}, Provisioner: NoProvisioner},
				volume("v", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "local" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			statusKeepsSpec(client)
			ctx := startBinder(t, client)
			var pv *corev1.PersistentVolume
			var c *corev1.PersistentVolumeClaim
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				var err error
				if c, err = client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, tt.claim, metav1.GetOptions{}); err != nil {
					return false, err
				}
				if tt.volume == "" {
					return c.Status.Phase == corev1.ClaimPending, nil
				}
				if pv, err = client.CoreV1().PersistentVolumes().Get(ctx, tt.volume, metav1.GetOptions{}); err != nil {
					return false, err
				}
				return c.Status.Phase == corev1.ClaimBound && pv.Status.Phase == corev1.VolumeBound, nil
			})
			if err != nil {
				t.Fatalf("claim %s: %v; claim %+v %+v", tt.claim, err, c.Spec, c.Status)
			}
			if tt.volume == "" {
				if c.Spec.VolumeName != "" {
					t.Errorf("claim bound to %s", c.Spec.VolumeName)
				}
				return
			}
			if c.Spec.VolumeName != tt.volume || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != tt.claim {
				t.Errorf("claim -> %q, volume -> %+v", c.Spec.VolumeName, pv.Spec.ClaimRef)
			}
			if tt.check != nil {
				tt.check(t, pv, c)
			}
		})
	}
}

// TestReleased: a volume whose claim is deleted is Released (Retain), or Failed when its
// policy is Delete and no provisioner deletes it; a free volume is Available.
func TestReleased(t *testing.T) {
	ref := func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "gone", UID: "uid-gone"}
		pv.Status.Phase = corev1.VolumeBound
	}
	client := fake.NewClientset(volume("retain", "1Gi", ref),
		volume("delete", "1Gi", ref, func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}),
		volume("provisioned", "1Gi", ref, func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			pv.Annotations = map[string]string{AnnProvisionedBy: "ebs.csi.aws.com"}
		}),
		volume("free", "1Gi"))
	statusKeepsSpec(client)
	ctx := startBinder(t, client)
	want := map[string]corev1.PersistentVolumePhase{"retain": corev1.VolumeReleased, "delete": corev1.VolumeFailed,
		"provisioned": corev1.VolumeReleased, "free": corev1.VolumeAvailable}
	for name, phase := range want {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			pv, err := client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && pv.Status.Phase == phase, err
		})
		if err != nil {
			t.Errorf("volume %s never %s: %v", name, phase, err)
		}
	}
}

func startBinder(t *testing.T, client *fake.Clientset) context.Context {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	b, err := New(client, factory, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })
	return ctx
}
