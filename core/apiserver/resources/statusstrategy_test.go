package resources

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestStatusStrategies checks what a status write keeps, as Kubernetes' status strategies
// do: the stored spec, the written status and metadata, except workloads' labels and
// pods' owner references.
func TestStatusStrategies(t *testing.T) {
	meta := func(labels map[string]string, owner string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: "x", Labels: labels, Annotations: map[string]string{"a": owner}}
		if owner != "" {
			m.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, UID: types.UID("u-" + owner)}}
		}
		return m
	}
	oldLabels, newLabels := map[string]string{"v": "old"}, map[string]string{"v": "new"}
	for _, tc := range []struct {
		name     string
		apply    func(obj, old runtime.Object)
		old, obj runtime.Object
		want     runtime.Object
	}{
		{
			name:  "CronJob: spec kept, status and annotations written",
			apply: statusOnly().(*strategy).prepareUpdate,
			old:   &batchv1.CronJob{ObjectMeta: meta(oldLabels, "old"), Spec: batchv1.CronJobSpec{Schedule: "* * * * *"}},
			obj: &batchv1.CronJob{ObjectMeta: meta(newLabels, "new"), Spec: batchv1.CronJobSpec{Schedule: "0 * * * *"},
				Status: batchv1.CronJobStatus{LastScheduleTime: &metav1.Time{}}},
			want: &batchv1.CronJob{ObjectMeta: meta(newLabels, "new"), Spec: batchv1.CronJobSpec{Schedule: "* * * * *"},
				Status: batchv1.CronJobStatus{LastScheduleTime: &metav1.Time{}}},
		},
		{
			name:  "Deployment: labels kept too",
			apply: workloadStatusOnly().(*strategy).prepareUpdate,
			old:   &appsv1.Deployment{ObjectMeta: meta(oldLabels, "old"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}},
			obj: &appsv1.Deployment{ObjectMeta: meta(newLabels, "new"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5)},
				Status: appsv1.DeploymentStatus{Replicas: 1}},
			want: &appsv1.Deployment{ObjectMeta: meta(oldLabels, "new"),
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}, Status: appsv1.DeploymentStatus{Replicas: 1}},
		},
		{
			name:  "Pod: owner references kept",
			apply: podStatusOnly().(*strategy).prepareUpdate,
			old:   &corev1.Pod{ObjectMeta: meta(oldLabels, "old"), Spec: corev1.PodSpec{NodeName: "n1"}},
			obj: &corev1.Pod{ObjectMeta: meta(newLabels, "new"), Spec: corev1.PodSpec{NodeName: "n2"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			want: &corev1.Pod{ObjectMeta: func() metav1.ObjectMeta {
				m := meta(newLabels, "new")
				m.OwnerReferences = meta(nil, "old").OwnerReferences
				return m
			}(),
				Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.apply(tc.obj, tc.old)
			if !apiequality.Semantic.DeepEqual(tc.obj, tc.want) {
				t.Errorf("got  %+v\nwant %+v", tc.obj, tc.want)
			}
		})
	}
}
