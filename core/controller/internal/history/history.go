// Package history keeps the ControllerRevisions of DaemonSets and StatefulSets, as
// Kubernetes' controller history does: one revision per distinct pod template, named
// <owner>-<hash>, numbered so that the current template always has the highest revision.
// `kubectl rollout history` lists them and `kubectl rollout undo` patches the owner with a
// revision's data, after which the owner's sync renumbers that revision as the newest.
package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	"github.com/wasmplane/wasmplane/core/controller/internal/controllerref"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// HashLabel is the label naming a pod's (and a revision's) revision hash.
const HashLabel = appsv1.ControllerRevisionHashLabelKey

// maxCollisions bounds how many hash collisions one sync resolves before giving up.
const maxCollisions = 10

// TemplatePatch is a revision's data for a pod template: the strategic-merge patch that
// puts the template back into its owner (`kubectl rollout undo` applies it as it is).
func TemplatePatch(t *corev1.PodTemplateSpec) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding pod template: %w", err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return nil, fmt.Errorf("decoding pod template: %w", err)
	}
	tmpl["$patch"] = "replace"
	out, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	if err != nil {
		return nil, fmt.Errorf("encoding revision data: %w", err)
	}
	return out, nil
}

// Template decodes the pod template of a revision made by TemplatePatch.
func Template(r *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var v struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(r.Data.Raw, &v); err != nil {
		return nil, fmt.Errorf("decoding revision %s: %w", r.Name, err)
	}
	return &v.Spec.Template, nil
}

// Hash is the revision hash of data, salted with collisionCount once there was a collision.
func Hash(data []byte, collisionCount *int32) string {
	h := fnv.New32a()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Owner is the object whose revisions are kept.
type Owner interface {
	metav1.Object
	runtime.Object
}

// History reads and writes ControllerRevisions.
type History struct {
	Client kubernetes.Interface
	Lister appslisters.ControllerRevisionLister
}

// Claim returns owner's revisions: those it controls whose labels selector matches, plus
// matching orphans, which it adopts (and releases its revisions selector no longer matches).
func (h *History) Claim(ctx context.Context, owner Owner, kind schema.GroupVersionKind, selector labels.Selector,
	canAdopt func(context.Context) error) ([]*appsv1.ControllerRevision, error) {
	all, err := h.Lister.ControllerRevisions(owner.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	m := &controllerref.Manager[*appsv1.ControllerRevision]{
		Owner: owner, Kind: kind, Selector: selector, CanAdopt: canAdopt,
		Patch: func(ctx context.Context, name string, patch []byte) error {
			_, err := h.Client.AppsV1().ControllerRevisions(owner.GetNamespace()).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
	}
	return m.Claim(ctx, all)
}

// Sort orders revisions oldest first: by revision number, then creation, then name.
func Sort(revs []*appsv1.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Ensure returns the revision holding data, which becomes the newest of revs: an existing
// equal revision is renumbered if a newer one exists, else a new one is created (named by
// the hash; a name taken by different data bumps *collisionCount, as Kubernetes does). It
// also returns the revisions as they now are, sorted.
func (h *History) Ensure(ctx context.Context, owner Owner, kind schema.GroupVersionKind, tmplLabels map[string]string,
	data []byte, revs []*appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision, error) {
	revs = append([]*appsv1.ControllerRevision(nil), revs...)
	Sort(revs)
	var next int64 = 1
	if n := len(revs); n > 0 {
		next = revs[n-1].Revision + 1
	}
	var equal []int
	for i, r := range revs {
		if bytes.Equal(r.Data.Raw, data) {
			equal = append(equal, i)
		}
	}
	if len(equal) > 0 {
		// The newest equal one is kept; older duplicates stay until history is truncated.
		i := equal[len(equal)-1]
		if i == len(revs)-1 {
			return revs[i], revs, nil
		}
		r := revs[i].DeepCopy()
		r.Revision = next
		updated, err := h.Client.AppsV1().ControllerRevisions(r.Namespace).Update(ctx, r, metav1.UpdateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("renumbering ControllerRevision %s: %w", r.Name, err)
		}
		revs = append(append(revs[:i:i], revs[i+1:]...), updated)
		return updated, revs, nil
	}
	for range maxCollisions {
		hash := Hash(data, collisionCount)
		r := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name: owner.GetName() + "-" + hash, Namespace: owner.GetNamespace(), Labels: map[string]string{},
				OwnerReferences: []metav1.OwnerReference{*controllerref.NewControllerRef(owner, kind)},
			},
			Data:     runtime.RawExtension{Raw: data},
			Revision: next,
		}
		for k, v := range tmplLabels {
			r.Labels[k] = v
		}
		r.Labels[HashLabel] = hash
		created, err := h.Client.AppsV1().ControllerRevisions(r.Namespace).Create(ctx, r, metav1.CreateOptions{})
		if err == nil {
			return created, append(revs, created), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("creating ControllerRevision %s: %w", r.Name, err)
		}
		existing, gerr := h.Client.AppsV1().ControllerRevisions(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, nil, fmt.Errorf("reading ControllerRevision %s: %w", r.Name, gerr)
		}
		if ref := metav1.GetControllerOfNoCopy(existing); ref != nil && ref.UID == owner.GetUID() && bytes.Equal(existing.Data.Raw, data) {
			// Ours already (a cache that lags): take it as it is.
			return existing, append(revs, existing), nil
		}
		*collisionCount++
	}
	return nil, nil, fmt.Errorf("ControllerRevision names for %s collide %d times", owner.GetName(), maxCollisions)
}

// Truncate deletes the oldest revisions beyond limit, keeping those inUse reports true for
// (revisions live pods still run) however many there are.
func (h *History) Truncate(ctx context.Context, revs []*appsv1.ControllerRevision, limit int, inUse func(*appsv1.ControllerRevision) bool) error {
	var old []*appsv1.ControllerRevision
	for _, r := range revs {
		if !inUse(r) {
			old = append(old, r)
		}
	}
	Sort(old)
	for _, r := range old[:max(0, len(old)-limit)] {
		err := h.Client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ControllerRevision %s: %w", r.Name, err)
		}
	}
	return nil
}
