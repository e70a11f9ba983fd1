package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const moreAPIsYAML = `apiVersion: v1
kind: PodTemplate
metadata:
  name: tmpl
template:
  metadata:
    labels:
      app: web
  spec:
    containers:
    - name: hello
      image: example.com/hello:1
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: more-class
spec:
  controller: example.com/ingress
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  ingressClassName: more-class
  rules:
  - host: web.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: deny
spec:
  podSelector:
    matchLabels:
      app: web
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: more-wasm
handler: wasm
`

// TestMoreAPIs checks that kubectl finds the conformance suite's extra resources in
// discovery, applies them server-side and prints them with Kubernetes' columns.
func TestKubectlMoreAPIs(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	const ns = "more"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}

	out, err := k.run(t, "", "api-resources")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^podtemplates\s+v1\s+true\s+PodTemplate$`,
		`(?m)^ingressclasses\s+networking\.k8s\.io/v1\s+false\s+IngressClass$`,
		`(?m)^ingresses\s+ing\s+networking\.k8s\.io/v1\s+true\s+Ingress$`,
		`(?m)^networkpolicies\s+netpol\s+networking\.k8s\.io/v1\s+true\s+NetworkPolicy$`,
		`(?m)^runtimeclasses\s+node\.k8s\.io/v1\s+false\s+RuntimeClass$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("api-resources output does not match %q:\n%s", want, out)
		}
	}

	if _, err := k.run(t, moreAPIsYAML, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args []string
		want []string
	}{
		{[]string{"get", "podtemplates"}, []string{`(?m)^NAME\s+CONTAINERS\s+IMAGES\s+POD LABELS$`, `(?m)^tmpl\s+hello\s+example\.com/hello:1\s+app=web$`}},
		{[]string{"get", "ingressclass"}, []string{`(?m)^NAME\s+CONTROLLER\s+PARAMETERS\s+AGE$`, `(?m)^more-class\s+example\.com/ingress\s+<none>\s+\d+s$`}},
		{[]string{"get", "ing"}, []string{`(?m)^NAME\s+CLASS\s+HOSTS\s+ADDRESS\s+PORTS\s+AGE$`, `(?m)^web\s+more-class\s+web\.example\.com\s+80\s+\d+s$`}},
		{[]string{"get", "netpol"}, []string{`(?m)^NAME\s+POD-SELECTOR\s+AGE$`, `(?m)^deny\s+app=web\s+\d+s$`}},
		{[]string{"get", "runtimeclass"}, []string{`(?m)^NAME\s+HANDLER\s+AGE$`, `(?m)^more-wasm\s+wasm\s+\d+s$`}},
	}
	for _, st := range steps {
		out, err := k.run(t, "", st.args...)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, want := range st.want {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("kubectl %v: output does not match %q:\n%s", st.args, want, out)
			}
		}
	}

	// A second server-side apply changing an owned field: the kind's schema is known.
	changed := strings.Replace(moreAPIsYAML, "number: 80", "number: 8080", 1)
	if _, err := k.run(t, changed, "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out, err = k.run(t, "", "get", "ing", "web", "-o", "jsonpath={.spec.rules[0].http.paths[0].backend.service.port.number}")
	if err != nil || out != "8080" {
		t.Errorf("after a second apply the ingress port is %q (%v), want 8080", out, err)
	}
	// kubectl shows the 422's field causes.
	_, err = k.run(t, "", "patch", "runtimeclass", "more-wasm", "--type=merge", "-p", `{"handler":"crun"}`)
	if err == nil || !regexp.MustCompile(`handler: Invalid value: "crun": field is immutable`).MatchString(err.Error()) {
		t.Errorf("changing a RuntimeClass handler: %v, want the immutable field error", err)
	}
}
