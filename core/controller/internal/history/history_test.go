package history

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

var kind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

func owner() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns", UID: "owner-uid"}}
}

func template(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
}

func TestTemplatePatchRoundTrip(t *testing.T) {
	data, err := TemplatePatch(template("one"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Template(&appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: data}})
	if err != nil || got.Spec.Containers[0].Image != "one" || got.Labels["app"] != "a" {
		t.Fatalf("Template = %+v, %v", got, err)
	}
	other, _ := TemplatePatch(template("two"))
	if Hash(data, nil) == Hash(other, nil) || Hash(data, nil) != Hash(data, nil) || Hash(data, nil) == Hash(data, new(int32)) {
		t.Error("Hash must be deterministic and differ by data and collision count")
	}
}

func rev(name string, n int64, data []byte) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Data: runtime.RawExtension{Raw: data}, Revision: n}
}

func TestEnsure(t *testing.T) {
	one, _ := TemplatePatch(template("one"))
	two, _ := TemplatePatch(template("two"))
	for _, tc := range []struct {
		name          string
		existing      []*appsv1.ControllerRevision
		data          []byte
		wantRevision  int64
		wantName      string // "" = the hash-named new one
		wantCollision int32
	}{
		{name: "first revision", data: one, wantRevision: 1},
		{name: "already newest", existing: []*appsv1.ControllerRevision{rev("r1", 1, one)}, data: one, wantRevision: 1, wantName: "r1"},
		{name: "new template", existing: []*appsv1.ControllerRevision{rev("r1", 1, one)}, data: two, wantRevision: 2},
		{name: "rollback renumbers the old revision", existing: []*appsv1.ControllerRevision{rev("r1", 1, one), rev("r2", 2, two)},
			data: one, wantRevision: 3, wantName: "r1"},
		{name: "name taken by other data", existing: []*appsv1.ControllerRevision{rev("agent-"+Hash(two, new(int32)), 1, one)}, data: two,
			wantRevision: 2, wantCollision: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			for _, r := range tc.existing {
				objs = append(objs, r)
			}
			client := fake.NewClientset(objs...)
			h := &History{Client: client, Lister: informers.NewSharedInformerFactory(client, 0).Apps().V1().ControllerRevisions().Lister()}
			var collisions int32
			got, all, err := h.Ensure(context.Background(), owner(), kind, map[string]string{"app": "a"}, tc.data, tc.existing, &collisions)
			if err != nil {
				t.Fatal(err)
			}
			if got.Revision != tc.wantRevision || collisions != tc.wantCollision {
				t.Errorf("revision %d collisions %d, want %d %d", got.Revision, collisions, tc.wantRevision, tc.wantCollision)
			}
			if tc.wantName != "" && got.Name != tc.wantName {
				t.Errorf("name %s, want %s", got.Name, tc.wantName)
			}
			if tc.wantName == "" && (got.Name != "agent-"+got.Labels[HashLabel] || got.Labels["app"] != "a" || metav1.GetControllerOf(got).UID != "owner-uid") {
				t.Errorf("new revision %+v", got.ObjectMeta)
			}
			if all[len(all)-1].Name != got.Name {
				t.Errorf("the revision returned must be the newest of %d", len(all))
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	revs := []*appsv1.ControllerRevision{rev("r1", 1, nil), rev("r2", 2, nil), rev("r3", 3, nil), rev("r4", 4, nil)}
	var objs []runtime.Object
	for _, r := range revs {
		objs = append(objs, r)
	}
	client := fake.NewClientset(objs...)
	h := &History{Client: client}
	// r4 is current and r1 still runs pods: of r2 and r3 one is kept.
	if err := h.Truncate(context.Background(), revs, 1, func(r *appsv1.ControllerRevision) bool { return r.Name == "r4" || r.Name == "r1" }); err != nil {
		t.Fatal(err)
	}
	list, _ := client.AppsV1().ControllerRevisions("ns").List(context.Background(), metav1.ListOptions{})
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	if len(names) != 3 || names[0] != "r1" || names[1] != "r3" || names[2] != "r4" {
		t.Errorf("left %v, want [r1 r3 r4]", names)
	}
}
