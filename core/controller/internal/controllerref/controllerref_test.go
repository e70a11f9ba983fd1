package controllerref

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var kind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func pod(name string, lbl map[string]string, owner types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: lbl}}
	if owner != "" {
		t := true
		p.OwnerReferences = []metav1.OwnerReference{{UID: owner, Controller: &t, Kind: "ReplicaSet", APIVersion: "apps/v1", Name: "x"}}
	}
	return p
}

func TestClaim(t *testing.T) {
	match := map[string]string{"app": "a"}
	other := map[string]string{"app": "b"}
	owner := &metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "me"}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		deleting    bool
		canAdoptErr error
		wantClaimed bool
		wantPatch   string // "adopt", "release" or ""
	}{
		{"ours and matching", pod("p", match, "me"), false, nil, true, ""},
		{"someone else's", pod("p", match, "them"), false, nil, false, ""},
		{"orphan matching is adopted", pod("p", match, ""), false, nil, true, "adopt"},
		{"orphan not matching is ignored", pod("p", other, ""), false, nil, false, ""},
		{"ours not matching is released", pod("p", other, "me"), false, nil, false, "release"},
		{"dying owner adopts nothing", pod("p", match, ""), true, nil, false, ""},
		{"dying owner releases nothing", pod("p", other, "me"), true, nil, false, ""},
		{"quorum read says deleting: no adoption", pod("p", match, ""), false, errors.New("being deleted"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := owner.DeepCopy()
			if tc.deleting {
				now := metav1.Now()
				o.DeletionTimestamp = &now
			}
			var patched string
			m := &Manager[*corev1.Pod]{Owner: o, Kind: kind, Selector: labels.SelectorFromSet(match),
				CanAdopt: func(context.Context) error { return tc.canAdoptErr },
				Patch: func(_ context.Context, _ string, p []byte) error {
					if strings.Contains(string(p), `"$patch":"delete"`) {
						patched = "release"
					} else {
						patched = "adopt"
					}
					return nil
				},
			}
			claimed, err := m.Claim(context.Background(), []*corev1.Pod{tc.pod})
			if (err != nil) != (tc.canAdoptErr != nil) {
				t.Fatalf("err = %v", err)
			}
			if (len(claimed) == 1) != tc.wantClaimed || patched != tc.wantPatch {
				t.Errorf("claimed=%d patch=%q, want claimed=%v patch=%q", len(claimed), patched, tc.wantClaimed, tc.wantPatch)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	cached := &metav1.ObjectMeta{Name: "rs", Namespace: "ns", UID: "rs-1"}
	get := func(name string) (*metav1.ObjectMeta, error) {
		if name != cached.Name {
			return nil, errors.New("not found")
		}
		return cached, nil
	}
	ref := func(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	}
	tests := []struct {
		name string
		ref  *metav1.OwnerReference
		want bool
	}{
		{"no controller", nil, false},
		{"the cached owner", ref("apps/v1", "ReplicaSet", "rs", "rs-1"), true},
		{"another kind", ref("apps/v1", "Deployment", "rs", "rs-1"), false},
		{"another version", ref("extensions/v1beta1", "ReplicaSet", "rs", "rs-1"), false},
		{"recreated under the name", ref("apps/v1", "ReplicaSet", "rs", "rs-0"), false},
		{"not in the cache", ref("apps/v1", "ReplicaSet", "gone", "rs-9"), false},
	}
	for _, tc := range tests {
		got, ok := Resolve(tc.ref, kind, get)
		if ok != tc.want || (ok && got != cached) || (!ok && got != nil) {
			t.Errorf("%s: Resolve = %v, %v; want found=%v", tc.name, got, ok, tc.want)
		}
	}
}

func TestSelecting(t *testing.T) {
	type owner struct {
		name string
		sel  *metav1.LabelSelector
	}
	owners := []owner{
		{"matches", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
		{"other", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}},
		{"empty selects nothing", &metav1.LabelSelector{}},
		{"invalid", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}},
		{"expression", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "c"}}}}},
	}
	got := Selecting(owners, func(o owner) *metav1.LabelSelector { return o.sel }, labels.Set{"app": "a", "tier": "web"})
	var names []string
	for _, o := range got {
		names = append(names, o.name)
	}
	if strings.Join(names, ",") != "matches,expression" {
		t.Errorf("Selecting = %v, want [matches expression]", names)
	}
}
