// Package persistentvolume binds PersistentVolumeClaims to existing PersistentVolumes as
// kube-controller-manager's persistentvolume-binder does for statically provisioned
// volumes: a claim naming a volume (spec.volumeName) or a volume naming a claim
// (spec.claimRef) is bound to it when the volume satisfies the claim, and any other
// pending claim gets the smallest available volume that satisfies it. A volume whose
// bound claim is gone is Released (reclaim policy Retain, or a volume its provisioner
// deletes), or Failed when its policy asks for a deletion or recycling no volume plugin
// here performs. Claims of a storage class that provisions dynamically, or binds when a
// pod is scheduled (WaitForFirstConsumer), are left to the provisioner and scheduler.
package persistentvolume

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/internal/worker"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// Kubernetes' annotations of a binding.
const (
	// AnnBoundByController marks the side of a binding the controller filled in (a
	// volume's claimRef, a claim's volumeName).
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnBindCompleted marks a claim whose binding is complete.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnProvisionedBy names the provisioner that created (and deletes) a volume.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// NoProvisioner is the provisioner of a storage class whose volumes are made by hand.
	NoProvisioner = "kubernetes.io/no-provisioner"
)

// Binder is the controller.
type Binder struct {
	client  kubernetes.Interface
	pvs     corelisters.PersistentVolumeLister
	pvcs    corelisters.PersistentVolumeClaimLister
	classes storagelisters.StorageClassLister
	synced  []cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
}

// Keys in the queue: a claim's namespace/name, or a volume's name after this prefix.
const volumeKey = "volume:"

// New returns a binder fed by factory's PersistentVolume, PersistentVolumeClaim and
// StorageClass informers.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory, log *slog.Logger) (*Binder, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pvs, pvcs, classes := factory.Core().V1().PersistentVolumes(), factory.Core().V1().PersistentVolumeClaims(), factory.Storage().V1().StorageClasses()
	b := &Binder{client: client, pvs: pvs.Lister(), pvcs: pvcs.Lister(), classes: classes.Lister(),
		synced: []cache.InformerSynced{pvs.Informer().HasSynced, pvcs.Informer().HasSynced, classes.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "persistentvolume_binder"}),
		log: log.With("controller", "persistentvolume-binder")}
	if _, err := pvcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.claimChanged,
		UpdateFunc: func(_, obj any) { b.claimChanged(obj) },
		DeleteFunc: b.claimChanged,
	}); err != nil {
		return nil, fmt.Errorf("adding claim handler: %w", err)
	}
	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    b.volumeChanged,
		UpdateFunc: func(_, obj any) { b.volumeChanged(obj) },
		DeleteFunc: b.volumeChanged,
	}); err != nil {
		return nil, fmt.Errorf("adding volume handler: %w", err)
	}
	return b, nil
}

func (b *Binder) claimChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	claim, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	b.queue.Add(claim.Namespace + "/" + claim.Name)
	if claim.Spec.VolumeName != "" {
		// Its volume may be released, or waiting for it.
		b.queue.Add(volumeKey + claim.Spec.VolumeName)
	}
}

func (b *Binder) volumeChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	b.queue.Add(volumeKey + pv.Name)
	// Claims naming it, and, when it is free, every pending claim it might satisfy.
	claims, err := b.pvcs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, c := range claims {
		if c.Spec.VolumeName == pv.Name || (pv.Spec.ClaimRef == nil && c.Spec.VolumeName == "") ||
			(pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == c.Namespace && pv.Spec.ClaimRef.Name == c.Name) {
			b.queue.Add(c.Namespace + "/" + c.Name)
		}
	}
}

// Run binds with workers until ctx ends.
func (b *Binder) Run(ctx context.Context, workers int) {
	worker.Run(ctx, b.queue, workers, b.synced, b.sync, b.log, "claim or volume")
}

func (b *Binder) sync(ctx context.Context, key string) error {
	if name, ok := strings.CutPrefix(key, volumeKey); ok {
		return b.syncVolume(ctx, name)
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	return b.syncClaim(ctx, ns, name)
}

func (b *Binder) syncClaim(ctx context.Context, ns, name string) error {
	claim, err := b.pvcs.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil {
		return nil
	}
	if claim.Spec.VolumeName != "" {
		pv, err := b.pvs.Get(claim.Spec.VolumeName)
		switch {
		case apierrors.IsNotFound(err):
			if claim.Status.Phase == corev1.ClaimBound {
				// Its volume was deleted under it.
				return b.setClaimPhase(ctx, claim, corev1.ClaimLost)
			}
			return b.setClaimPhase(ctx, claim, corev1.ClaimPending)
		case err != nil:
			return err
		}
		if pv.Spec.ClaimRef == nil && satisfies(pv, claim) || refersTo(pv, claim) {
			return b.bind(ctx, pv, claim)
		}
		// Bound to another claim, or it cannot hold this one.
		return b.setClaimPhase(ctx, claim, corev1.ClaimPending)
	}
	if b.leftToOthers(claim) {
		return b.setClaimPhase(ctx, claim, corev1.ClaimPending)
	}
	pv, err := b.findVolume(claim)
	if err != nil {
		return err
	}
	if pv == nil {
		return b.setClaimPhase(ctx, claim, corev1.ClaimPending)
	}
	return b.bind(ctx, pv, claim)
}

// leftToOthers reports whether claim's storage class provisions its volumes (an external
// provisioner does) or binds them at scheduling.
func (b *Binder) leftToOthers(claim *corev1.PersistentVolumeClaim) bool {
	name := ptr.Deref(claim.Spec.StorageClassName, "")
	if name == "" {
		return false
	}
	class, err := b.classes.Get(name)
	if err != nil {
		// A class that does not exist (yet) provisions nothing: volumes of that class
		// made by hand still bind, as in Kubernetes.
		return false
	}
	return class.Provisioner != NoProvisioner ||
		ptr.Deref(class.VolumeBindingMode, storagev1.VolumeBindingImmediate) == storagev1.VolumeBindingWaitForFirstConsumer
}

// findVolume returns the volume that names claim, else the smallest free volume that
// satisfies it, else nil.
func (b *Binder) findVolume(claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	pvs, err := b.pvs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var best *corev1.PersistentVolume
	for _, pv := range pvs {
		if !satisfies(pv, claim) {
			continue
		}
		if pv.Spec.ClaimRef != nil {
			if refersTo(pv, claim) {
				return pv, nil
			}
			continue
		}
		if pv.Status.Phase != "" && pv.Status.Phase != corev1.VolumeAvailable && pv.Status.Phase != corev1.VolumePending {
			continue
		}
		if best == nil {
			best = pv
			continue
		}
		have, other := capacity(pv), capacity(best)
		if c := have.Cmp(other); c < 0 || (c == 0 && pv.Name < best.Name) {
			best = pv
		}
	}
	return best, nil
}

// refersTo reports whether pv's claimRef names claim (by namespace and name, and by uid
// when it has one).
func refersTo(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name && (ref.UID == "" || ref.UID == claim.UID)
}

func capacity(pv *corev1.PersistentVolume) resource.Quantity {
	return pv.Spec.Capacity[corev1.ResourceStorage]
}

// satisfies is Kubernetes' check that a volume can hold a claim: not being deleted, the
// same storage class, volume mode and volume attributes class, every access mode the
// claim asks for, at least the storage it requests, and the labels its selector wants.
func satisfies(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	if pv.DeletionTimestamp != nil {
		return false
	}
	if pv.Spec.StorageClassName != ptr.Deref(claim.Spec.StorageClassName, "") {
		return false
	}
	if ptr.Deref(pv.Spec.VolumeMode, corev1.PersistentVolumeFilesystem) != ptr.Deref(claim.Spec.VolumeMode, corev1.PersistentVolumeFilesystem) {
		return false
	}
	if ptr.Deref(pv.Spec.VolumeAttributesClassName, "") != ptr.Deref(claim.Spec.VolumeAttributesClassName, "") {
		return false
	}
	for _, m := range claim.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return false
		}
	}
	if want, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		if have := capacity(pv); have.Cmp(want) < 0 {
			return false
		}
	}
	if claim.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pv.Labels)) {
			return false
		}
	}
	return true
}

// bind completes the binding of pv and claim, each step only if not yet done: the
// volume's claimRef, its Bound phase, the claim's volumeName and annotations, its Bound
// status with the volume's access modes, capacity and volume attributes class.
func (b *Binder) bind(ctx context.Context, pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID != claim.UID || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
		pv = pv.DeepCopy()
		if pv.Spec.ClaimRef == nil {
			metav1.SetMetaDataAnnotation(&pv.ObjectMeta, AnnBoundByController, "yes")
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace,
			Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
		var err error
		if pv, err = b.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("binding volume %s to %s/%s: %w", pv.Name, claim.Namespace, claim.Name, err)
		}
	}
	if err := b.setVolumePhase(ctx, pv, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if claim.Spec.VolumeName != pv.Name || claim.Annotations[AnnBindCompleted] != "yes" {
		claim = claim.DeepCopy()
		if claim.Spec.VolumeName == "" {
			metav1.SetMetaDataAnnotation(&claim.ObjectMeta, AnnBoundByController, "yes")
			claim.Spec.VolumeName = pv.Name
		}
		metav1.SetMetaDataAnnotation(&claim.ObjectMeta, AnnBindCompleted, "yes")
		var err error
		if claim, err = b.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("binding claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, pv.Name, err)
		}
	}
	want := corev1.ResourceList{}
	if c, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		want[corev1.ResourceStorage] = c
	}
	st := claim.Status
	if st.Phase == corev1.ClaimBound && slices.Equal(st.AccessModes, pv.Spec.AccessModes) && st.Capacity.Storage().Equal(*want.Storage()) &&
		(pv.Spec.VolumeAttributesClassName == nil || ptr.Equal(st.CurrentVolumeAttributesClassName, pv.Spec.VolumeAttributesClassName)) {
		return nil
	}
	claim = claim.DeepCopy()
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.AccessModes = pv.Spec.AccessModes
	claim.Status.Capacity = want
	if pv.Spec.VolumeAttributesClassName != nil {
		claim.Status.CurrentVolumeAttributesClassName = pv.Spec.VolumeAttributesClassName
	}
	if _, err := b.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func (b *Binder) setClaimPhase(ctx context.Context, claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase) error {
	if claim.Status.Phase == phase {
		return nil
	}
	claim = claim.DeepCopy()
	claim.Status.Phase = phase
	if _, err := b.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return nil
}

func (b *Binder) setVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) error {
	if pv.Status.Phase == phase && pv.Status.Message == message {
		return nil
	}
	pv = pv.DeepCopy()
	if pv.Status.Phase != phase {
		now := metav1.Now()
		pv.Status.LastPhaseTransitionTime = &now
	}
	pv.Status.Phase, pv.Status.Message = phase, message
	if _, err := b.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status of volume %s: %w", pv.Name, err)
	}
	return nil
}

// syncVolume keeps a volume's phase: Available while free (or waiting for the claim it
// names), Bound while its claim holds it, and, once that claim is gone, Released or
// Failed by its reclaim policy.
func (b *Binder) syncVolume(ctx context.Context, name string) error {
	pv, err := b.pvs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return b.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
	}
	claim, err := b.pvcs.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	switch {
	case apierrors.IsNotFound(err), err == nil && ref.UID != "" && claim.UID != ref.UID:
		if ref.UID == "" {
			// Set aside for a claim not created yet.
			return b.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
		}
		if pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
			return nil
		}
		switch pv.Spec.PersistentVolumeReclaimPolicy {
		case corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle:
			if pv.Annotations[AnnProvisionedBy] == "" {
				return b.setVolumePhase(ctx, pv, corev1.VolumeFailed,
					fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name))
			}
		}
		return b.setVolumePhase(ctx, pv, corev1.VolumeReleased, "")
	case err != nil:
		return err
	}
	if claim.Spec.VolumeName == pv.Name {
		return b.setVolumePhase(ctx, pv, corev1.VolumeBound, "")
	}
	if claim.Spec.VolumeName != "" && pv.Annotations[AnnBoundByController] == "yes" {
		// The claim went to another volume: this one, claimed by the controller, is free.
		pv = pv.DeepCopy()
		pv.Spec.ClaimRef = nil
		delete(pv.Annotations, AnnBoundByController)
		if _, err := b.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("unbinding volume %s: %w", pv.Name, err)
		}
		return nil
	}
	// The claim binds it (or waits): syncClaim finishes. A volume already Bound stays
	// so while the claim's own update is on its way.
	b.queue.Add(claim.Namespace + "/" + claim.Name)
	if pv.Status.Phase == corev1.VolumeBound {
		return nil
	}
	return b.setVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
}
