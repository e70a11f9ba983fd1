package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/webhookserver"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestWebhookThroughKubectl applies a ValidatingWebhookConfiguration with kubectl and
// checks what a user sees: the webhook's denial message and its warnings.
func TestWebhookThroughKubectl(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := context.Background()
	const ns = "hooked"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hook := webhookserver.Start(t, func(_ *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var cm corev1.ConfigMap
		_ = json.Unmarshal(req.Object.Raw, &cm)
		if cm.Data["color"] == "red" {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "red is not allowed"}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"configmap " + req.Name + " looks fine"}}
	})
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	config := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: colors
webhooks:
- name: deny.example.com
  clientConfig:
    url: %s/validate
    caBundle: %s
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["configmaps"]
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: %s
  sideEffects: None
  admissionReviewVersions: ["v1"]
`, hook.URL, base64.StdEncoding.EncodeToString(hook.CABundle), ns)
	if out, err := k.run(t, config, "apply", "-f", "-"); err != nil || out != "validatingwebhookconfiguration.admissionregistration.k8s.io/colors created\n" {
		t.Fatalf("apply: %q, %v", out, err)
	}
	out, err := k.run(t, "", "get", "validatingwebhookconfigurations")
	if err != nil || !regexp.MustCompile(`(?m)^NAME\s+WEBHOOKS\s+AGE\n^colors\s+1\s+\d+s$`).MatchString(out) {
		t.Fatalf("get: %q, %v", out, err)
	}
	// The configuration takes effect once the server's informer has it.
	n := 0
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		n++
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n)}}, metav1.CreateOptions{})
		return err == nil && hook.Calls() > 0, nil
	}); err != nil {
		t.Fatal("the webhook never took effect")
	}

	stderr := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := k.command(cctx, args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		return errOut.String(), err
	}
	msg, err := stderr("create", "configmap", "red", "--from-literal=color=red")
	if err == nil || !strings.Contains(msg, `admission webhook "deny.example.com" denied the request: red is not allowed`) {
		t.Fatalf("denied create: err %v, stderr %q", err, msg)
	}
	msg, err = stderr("create", "configmap", "blue", "--from-literal=color=blue")
	if err != nil || !strings.Contains(msg, "Warning: configmap blue looks fine") {
		t.Fatalf("allowed create: err %v, stderr %q", err, msg)
	}
}
