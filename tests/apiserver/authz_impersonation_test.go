package apiserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// as is u impersonating someone through client-go's ImpersonationConfig.
func (u *user) as(t *testing.T, imp rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(u.cfg)
	cfg.Impersonate = imp
	return kubernetes.NewForConfigOrDie(cfg)
}

func authzWhoami(t *testing.T, cs kubernetes.Interface) (authenticationv1.UserInfo, error) {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// TestImpersonation drives the Impersonate-* headers through client-go against RBAC:
// who may impersonate whom, what the impersonated request may then do, and that the
// registry, admission and the pod trace see the impersonated user.
func TestImpersonation(t *testing.T) {
	s := testserver.StartAPI(t)
	ctx := context.Background()
	admin := s.Clientset(t, false)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "imp"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}
	}
	roles := []*rbacv1.ClusterRole{
		// dana may impersonate jane, and only jane.
		{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-jane"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"jane"}}}},
		// erin may impersonate any user, group, service account, uid and extra.
		{ObjectMeta: metav1.ObjectMeta{Name: "impersonate-all"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users", "groups", "serviceaccounts"}, Verbs: []string{"impersonate"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"uids", "userextras/example.com/team", "userextras/scopes"}, Verbs: []string{"impersonate"}}}},
		// jane may work with config maps and pods (bound in namespace imp), and create CSRs.
		{ObjectMeta: metav1.ObjectMeta{Name: "jane-work"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"*"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "jane-csr"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get"}}}},
	}
	for _, r := range roles {
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bindings := []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "dana-impersonates-jane"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "impersonate-jane"}, Subjects: subject("dana")},
		{ObjectMeta: metav1.ObjectMeta{Name: "erin-impersonates"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "impersonate-all"}, Subjects: subject("erin")},
	}
	for _, b := range bindings {
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-work", Namespace: "imp"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jane-work"}, Subjects: subject("jane")}
	if _, err := admin.RbacV1().RoleBindings("imp").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "jane-csr"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "jane-csr"}, Subjects: subject("jane")}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dana, erin, mallory := newUser(t, s, "dana"), newUser(t, s, "erin"), newUser(t, s, "mallory")
	danaAsJane := dana.as(t, rest.ImpersonationConfig{UserName: "jane"})
	// The authorizer's informers catch up with the bindings.
	waitfor.Condition(t, time.Minute, "dana to impersonate jane", func(context.Context) (bool, error) {
		ui, err := authzWhoami(t, danaAsJane)
		return err == nil && ui.Username == "jane", nil
	})
	waitfor.Condition(t, time.Minute, "erin's binding", func(ctx context.Context) (bool, error) {
		_, err := authzWhoami(t, erin.as(t, rest.ImpersonationConfig{UserName: "x"}))
		return err == nil, nil
	})
	waitfor.Condition(t, time.Minute, "jane's bindings", func(ctx context.Context) (bool, error) {
		_, err := danaAsJane.CoreV1().ConfigMaps("imp").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	t.Run("the impersonated user gets system:authenticated", func(t *testing.T) {
		ui, err := authzWhoami(t, danaAsJane)
		if err != nil || ui.Username != "jane" || !slices.Equal(ui.Groups, []string{"system:authenticated"}) || ui.UID != "" {
			t.Fatalf("dana as jane: %+v %v", ui, err)
		}
	})
	t.Run("the request runs with the impersonated user's rights", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-jane"}}
		if _, err := danaAsJane.CoreV1().ConfigMaps("imp").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("jane creating in imp: %v", err)
		}
		_, err := danaAsJane.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		want := `configmaps is forbidden: User "jane" cannot create resource "configmaps" in API group "" in the namespace "default"`
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("jane creating in default: want %q, got %v", want, err)
		}
		// dana herself cannot create there either: the rights are jane's, not dana's.
		if _, err := dana.cs.CoreV1().ConfigMaps("imp").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("dana creating in imp herself: want 403, got %v", err)
		}
	})
	t.Run("a grant on one user name covers only that name", func(t *testing.T) {
		_, err := authzWhoami(t, dana.as(t, rest.ImpersonationConfig{UserName: "bob"}))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "dana" cannot impersonate`) {
			t.Fatalf("dana as bob: want 403, got %v", err)
		}
		// Nor may dana add a group to jane.
		_, err = authzWhoami(t, dana.as(t, rest.ImpersonationConfig{UserName: "jane", Groups: []string{"system:masters"}}))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("dana as jane in system:masters: want 403, got %v", err)
		}
	})
	t.Run("a requester without the impersonate verb gets 403", func(t *testing.T) {
		_, err := authzWhoami(t, mallory.as(t, rest.ImpersonationConfig{UserName: "jane"}))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "mallory" cannot impersonate`) {
			t.Fatalf("mallory as jane: want 403, got %v", err)
		}
		_, err = mallory.as(t, rest.ImpersonationConfig{UserName: "system:admin", Groups: []string{"system:masters"}}).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("mallory as system:admin: want 403, got %v", err)
		}
	})
	t.Run("user, groups, uid and extra", func(t *testing.T) {
		ui, err := authzWhoami(t, erin.as(t, rest.ImpersonationConfig{UserName: "jane", UID: "uid-1", Groups: []string{"devs", "ops"},
			Extra: map[string][]string{"example.com/team": {"blue", "green"}, "scopes": {"view"}}}))
		if err != nil {
			t.Fatal(err)
		}
		want := authenticationv1.UserInfo{Username: "jane", UID: "uid-1", Groups: []string{"devs", "ops", "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"example.com/team": {"blue", "green"}, "scopes": {"view"}}}
		got, _ := json.Marshal(ui)
		exp, _ := json.Marshal(want)
		if string(got) != string(exp) {
			t.Fatalf("erin as jane:\n got %s\nwant %s", got, exp)
		}
	})
	t.Run("a service account gets its groups", func(t *testing.T) {
		ui, err := authzWhoami(t, erin.as(t, rest.ImpersonationConfig{UserName: "system:serviceaccount:imp:builder"}))
		want := []string{"system:serviceaccounts", "system:serviceaccounts:imp", "system:authenticated"}
		if err != nil || ui.Username != "system:serviceaccount:imp:builder" || !slices.Equal(ui.Groups, want) {
			t.Fatalf("erin as a service account: %+v %v", ui, err)
		}
	})
	t.Run("groups without a user are a bad request", func(t *testing.T) {
		err := erin.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/imp/configmaps").
			SetHeader("Impersonate-Group", "devs").Do(ctx).Error()
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "without impersonating a user") {
			t.Fatalf("want 400, got %v", err)
		}
	})
	t.Run("the registry, admission and the pod trace see the impersonated user", func(t *testing.T) {
		// The CSR registry records the requester as admission sees it.
		csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "jane-csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: csrPEM(t, "jane"), SignerName: "example.com/signer",
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}}}
		out, err := danaAsJane.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Spec.Username != "jane" || !slices.Contains(out.Spec.Groups, "system:authenticated") {
			t.Fatalf("CSR requester %q %v, want jane", out.Spec.Username, out.Spec.Groups)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "by-jane"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:1"}}}}
		if _, err := danaAsJane.CoreV1().Pods("imp").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/imp/pods/by-jane/trace").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			Steps []struct{ Component, Step, Result, Detail string }
		}
		if err := json.Unmarshal(raw, &tr); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, st := range tr.Steps {
			if st.Component == "impersonation" {
				found = strings.Contains(st.Detail, `user "jane"`) && strings.Contains(st.Detail, `requested by "dana"`)
			}
		}
		if !found {
			t.Fatalf("no impersonation step naming jane and dana in the pod trace: %s", raw)
		}
	})
}

// csrPEM is a PEM certificate request for CN=cn with a fresh key.
func csrPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}
