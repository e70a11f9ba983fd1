package plugins

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/core/admission"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestServiceAccount(t *testing.T) {
	noMount := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}, AutomountServiceAccountToken: ptr.To(false),
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}}
	builder := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}
	tests := []struct {
		name       string
		pod        func() *corev1.Pod
		accounts   map[string]*corev1.ServiceAccount
		wantSA     string
		wantMount  bool
		wantErr    string
		wantSecret string
	}{
		{name: "empty name becomes default, default missing is fine", pod: func() *corev1.Pod { return pod() }, wantSA: "default", wantMount: true},
		{name: "named account exists", pod: func() *corev1.Pod { p := pod(); p.Spec.ServiceAccountName = "builder"; return p },
			accounts: map[string]*corev1.ServiceAccount{"builder": builder}, wantSA: "builder", wantMount: true},
		{name: "named account missing", pod: func() *corev1.Pod { p := pod(); p.Spec.ServiceAccountName = "ghost"; return p },
			wantErr: `pods "p" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found`},
		{name: "pod opts out", pod: func() *corev1.Pod { p := pod(); p.Spec.AutomountServiceAccountToken = ptr.To(false); return p },
			wantSA: "default"},
		{name: "account opts out, pull secrets copied", pod: func() *corev1.Pod { p := pod(); p.Spec.ServiceAccountName = "quiet"; return p },
			accounts: map[string]*corev1.ServiceAccount{"quiet": noMount}, wantSA: "quiet", wantSecret: "pull"},
		{name: "pod setting wins over account", pod: func() *corev1.Pod {
			p := pod()
			p.Spec.ServiceAccountName = "quiet"
			p.Spec.AutomountServiceAccountToken = ptr.To(true)
			return p
		}, accounts: map[string]*corev1.ServiceAccount{"quiet": noMount}, wantSA: "quiet", wantMount: true, wantSecret: "pull"},
		{name: "existing mount at the token path is kept", pod: func() *corev1.Pod {
			p := pod()
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: DefaultAPITokenMountPath}}
			return p
		}, wantSA: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &ServiceAccount{Accounts: &fakeReader{accounts: tt.accounts}, VolumeSuffix: func() string { return "abcde" }}
			obj := tt.pod()
			a := attrs(admission.Create, "pods", obj)
			err := p.Admit(context.Background(), a)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !apierrors.IsForbidden(err) {
					t.Fatalf("err = %v, want 403 %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if obj.Spec.ServiceAccountName != tt.wantSA {
				t.Errorf("serviceAccountName = %q, want %q", obj.Spec.ServiceAccountName, tt.wantSA)
			}
			hasVolume := false
			for _, v := range obj.Spec.Volumes {
				if v.Name == "kube-api-access-abcde" {
					hasVolume = true
					src := v.Projected.Sources
					if len(src) != 3 || *src[0].ServiceAccountToken.ExpirationSeconds != 3607 || src[1].ConfigMap.Name != "kube-root-ca.crt" ||
						src[2].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.namespace" {
						t.Errorf("projection = %+v", src)
					}
				}
			}
			mounted := false
			for _, m := range obj.Spec.Containers[0].VolumeMounts {
				if m.Name == "kube-api-access-abcde" && m.MountPath == DefaultAPITokenMountPath && m.ReadOnly {
					mounted = true
				}
			}
			if hasVolume != tt.wantMount || mounted != tt.wantMount {
				t.Errorf("volume %v mounted %v, want %v", hasVolume, mounted, tt.wantMount)
			}
			if tt.wantSecret != "" && (len(obj.Spec.ImagePullSecrets) != 1 || obj.Spec.ImagePullSecrets[0].Name != tt.wantSecret) {
				t.Errorf("imagePullSecrets = %v", obj.Spec.ImagePullSecrets)
			}
		})
	}
}

func TestServiceAccountIgnoresOtherRequests(t *testing.T) {
	p := &ServiceAccount{Accounts: &fakeReader{}}
	for _, a := range []*admission.Attributes{
		attrs(admission.Update, "pods", pod()),
		attrs(admission.Create, "configmaps", &corev1.ConfigMap{}),
		func() *admission.Attributes {
			a := attrs(admission.Create, "pods", pod())
			a.Subresource = "status"
			return a
		}(),
	} {
		if err := p.Admit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if pd, ok := a.Object.(*corev1.Pod); ok && (pd.Spec.ServiceAccountName != "" || len(pd.Spec.Volumes) > 0) {
			t.Errorf("%s %s/%s was mutated", a.Operation, a.Resource.Resource, a.Subresource)
		}
	}
}

func TestServiceAccountMirrorPod(t *testing.T) {
	p := &ServiceAccount{Accounts: &fakeReader{}}
	obj := pod()
	obj.Annotations = map[string]string{mirrorPodAnnotation: "x"}
	obj.Spec.ServiceAccountName = "default"
	err := p.Admit(context.Background(), attrs(admission.Create, "pods", obj))
	if err == nil || !strings.Contains(err.Error(), "a mirror pod may not reference service accounts") {
		t.Fatalf("err = %v", err)
	}
}
