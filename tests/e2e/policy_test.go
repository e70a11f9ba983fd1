// The policy tests check the CEL admission policies (ValidatingAdmissionPolicy,
// MutatingAdmissionPolicy and their bindings) on a real server, through client-go and
// kubectl: what is refused when written, what a user sees when a policy denies, warns
// or audits, params from ConfigMaps and custom resources, mutations, and bindings coming
// and going.

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/controller/vapstatus"
	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// auditLog keeps the audit annotations the server logs (wasmplane has no audit log).
type auditLog struct {
	mu      sync.Mutex
	entries []string
}

func (l *auditLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *auditLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *auditLog) WithGroup(string) slog.Handler            { return l }
func (l *auditLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "admission audit annotation" {
		return nil
	}
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, b.String())
	return nil
}

func (l *auditLog) has(substrings ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		all := true
		for _, s := range substrings {
			all = all && strings.Contains(e, s)
		}
		if all {
			return true
		}
	}
	return false
}

// kubectl runs the kubectl binary against one server and namespace, with its own HOME
// so that its discovery cache starts empty.
type policyKubectl struct{ kubeconfig, home, ns string }

// run runs kubectl to completion with stdin and returns its stdout and stderr.
func (k *policyKubectl) run(ctx context.Context, stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", k.kubeconfig, "-n", k.ns}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+k.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader(stdin)
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func namespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// inNamespace limits a policy to one test namespace.
func inNamespace(ns string, resource string, ops ...admissionregistrationv1.OperationType) *admissionregistrationv1.MatchResources {
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}}
}

// until polls cond until it holds or 30 s pass: policies and bindings take effect once
// the server's informers and the plugin's compilation (every second) have them.
func until(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("%s: never happened", what)
	}
}

func TestPolicies(t *testing.T) {
	audit := &auditLog{}
	srv := testserver.StartAPI(t, func(c *server.Config) { c.Logger = slog.New(audit) })
	cs := srv.Clientset(t, false)
	t.Run("invalid policies are refused", func(t *testing.T) { invalidPolicies(t, srv, cs) })
	t.Run("deny, warn and audit through kubectl", func(t *testing.T) { denyWarnAudit(t, srv, cs, audit) })
	t.Run("ConfigMap param", func(t *testing.T) { configMapParam(t, cs) })
	t.Run("custom resource param", func(t *testing.T) { customResourceParam(t, srv, cs) })
	t.Run("mutating policies", func(t *testing.T) { mutatingPolicies(t, srv, cs) })
	t.Run("type checking", func(t *testing.T) { typeChecking(t, cs) })
}

// The type-checking controller (run here on its own: StartAPI runs no controllers)
// writes a warning for an expression that compiles untyped but names a field the matched
// kind does not have, and the generation it checked.
func typeChecking(t *testing.T, cs kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := vapstatus.New(cs, factory, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery())), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		c.Run(ctx, 1)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "typo"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: inNamespace("typed", "configmaps", admissionregistrationv1.Create),
			Validations: []admissionregistrationv1.Validation{{Expression: "object.nosuchfield == 'x'"}, {Expression: "size(object.data) < 10"}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var status admissionregistrationv1.ValidatingAdmissionPolicyStatus
	until(t, "type-checking status", func(ctx context.Context) bool {
		p, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "typo", metav1.GetOptions{})
		if err != nil {
			return false
		}
		status = p.Status
		return p.Status.ObservedGeneration == p.Generation && p.Status.TypeChecking != nil
	})
	w := status.TypeChecking.ExpressionWarnings
	if len(w) != 1 || w[0].FieldRef != "spec.validations[0].expression" || !strings.Contains(w[0].Warning, "nosuchfield") {
		t.Fatalf("type-checking warnings %+v", w)
	}
}

// A policy whose CEL does not compile is refused with 422 and the expression's path,
// through client-go and kubectl.
func invalidPolicies(t *testing.T, srv *testserver.Server, cs kubernetes.Interface) {
	ctx := context.Background()
	bad := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: inNamespace("x", "configmaps", admissionregistrationv1.Create),
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name.startsWith("}}}}
	_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, bad, metav1.CreateOptions{})
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.Status().Code != 422 || status.Status().Details == nil ||
		len(status.Status().Details.Causes) != 1 || status.Status().Details.Causes[0].Field != "spec.validations[0].expression" {
		t.Fatalf("create with bad CEL: %v (%+v)", err, status)
	}
	badMAP := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: inNamespace("x", "pods", admissionregistrationv1.Create),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: "[JSONPatch{op: 'add', path: 1}]"}}}}}
	_, err = cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, badMAP, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.mutations[0].jsonPatch.expression") {
		t.Fatalf("create MAP with bad JSONPatch: %v", err)
	}
	k := &policyKubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: "default"}
	_, stderr, err := k.run(ctx, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: bad
spec:
  policyName: bad
  validationActions: [Deny, Warn]
`, "apply", "-f", "-")
	want := `The ValidatingAdmissionPolicyBinding "bad" is invalid: spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn`
	if err == nil || !strings.Contains(stderr, want) {
		t.Fatalf("kubectl apply of a bad binding: %v, stderr %q", err, stderr)
	}
}

// A policy requiring the label team denies through kubectl with kube-apiserver's message;
// its binding switched to Warn lets the object in with a kubectl warning, switched to
// Audit logs the failure; deleted, the policy stops applying.
func denyWarnAudit(t *testing.T, srv *testserver.Server, cs kubernetes.Interface, audit *auditLog) {
	ctx := context.Background()
	const ns = "vap"
	namespace(t, cs, ns)
	k := &policyKubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	manifest := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: require-team
spec:
  matchConstraints:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: vap
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  variables:
  - name: labels
    expression: "has(object.metadata.labels) ? object.metadata.labels : {}"
  validations:
  - expression: "'team' in variables.labels"
    messageExpression: "'configmap ' + object.metadata.name + ' has no team label'"
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: require-team
spec:
  policyName: require-team
  validationActions: [%s]
`
	apply := func(action string) {
		t.Helper()
		if _, stderr, err := k.run(ctx, fmt.Sprintf(manifest, action), "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, stderr)
		}
	}
	apply("Deny")
	out, _, err := k.run(ctx, "", "get", "validatingadmissionpolicies,validatingadmissionpolicybindings")
	if err != nil || !strings.Contains(out, "require-team") || !strings.Contains(out, "VALIDATIONS") || !strings.Contains(out, "POLICYNAME") {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	n := 0
	until(t, "the Deny binding takes effect", func(ctx context.Context) bool {
		n++
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n)}}, metav1.CreateOptions{})
		return apierrors.IsInvalid(err)
	})
	_, stderr, err := k.run(ctx, "", "create", "configmap", "plain")
	// kube-apiserver's message says forbidden whatever the reason (here Invalid, 422).
	want := `configmaps "plain" is forbidden: ValidatingAdmissionPolicy 'require-team' with binding 'require-team' denied request: configmap plain has no team label`
	if err == nil || !strings.Contains(stderr, want) {
		t.Fatalf("kubectl create under Deny: %v, stderr %q", err, stderr)
	}
	cm := `apiVersion: v1
kind: ConfigMap
metadata:
  name: teamed
  labels:
    team: a
`
	if _, stderr, err := k.run(ctx, cm, "create", "-f", "-"); err != nil {
		t.Fatalf("kubectl create with the label: %v\n%s", err, stderr)
	}

	apply("Warn")
	until(t, "the Warn binding takes effect", func(ctx context.Context) bool {
		n++
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", n)}}, metav1.CreateOptions{})
		return err == nil
	})
	out, stderr, err = k.run(ctx, "", "create", "configmap", "warned")
	want = "Warning: Validation failed for ValidatingAdmissionPolicy 'require-team' with binding 'require-team': configmap warned has no team label"
	if err != nil || out != "configmap/warned created\n" || !strings.Contains(stderr, want) {
		t.Fatalf("kubectl create under Warn: %v, stdout %q, stderr %q", err, out, stderr)
	}

	apply("Audit")
	until(t, "the Audit binding takes effect", func(ctx context.Context) bool {
		n++
		name := fmt.Sprintf("probe-%d", n)
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err == nil && audit.has("name="+name, "validation.policy.admission.k8s.io/validation_failure", `"validationActions":["Audit"]`)
	})
	out, stderr, err = k.run(ctx, "", "create", "configmap", "audited")
	if err != nil || out != "configmap/audited created\n" || strings.Contains(stderr, "Warning") {
		t.Fatalf("kubectl create under Audit: %v, stdout %q, stderr %q", err, out, stderr)
	}
	if !audit.has("name=audited", "require-team", "configmap audited has no team label") {
		t.Fatal("no audit annotation for configmap audited")
	}
	denied, err := scrape.MetricSum(ctx, cs, "apiserver_validating_admission_policy_check_total",
		map[string]string{"policy": "require-team", "enforcement_action": "deny"})
	if err != nil || denied < 1 {
		t.Fatalf("apiserver_validating_admission_policy_check_total of denials: %v, %v", denied, err)
	}

	// Back to Deny, then the binding goes: the policy alone does nothing.
	apply("Deny")
	until(t, "Deny again", func(ctx context.Context) bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return apierrors.IsInvalid(err)
	})
	if _, stderr, err := k.run(ctx, "", "delete", "validatingadmissionpolicybinding", "require-team"); err != nil {
		t.Fatalf("kubectl delete binding: %v\n%s", err, stderr)
	}
	until(t, "the policy stops applying without its binding", func(ctx context.Context) bool {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err == nil
	})
}

// A policy reads a ConfigMap named by its binding: secrets' names must start with the
// prefix it holds; with the ConfigMap missing, parameterNotFoundAction Deny refuses.
func configMapParam(t *testing.T, cs kubernetes.Interface) {
	ctx := context.Background()
	const ns = "cmparam"
	namespace(t, cs, ns)
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "secret-prefix"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: inNamespace(ns, "secrets", admissionregistrationv1.Create),
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name.startsWith(params.data.prefix)",
				MessageExpression: "'secret names must start with ' + params.data.prefix"}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "secret-prefix"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "secret-prefix",
			ParamRef:          &admissionregistrationv1.ParamRef{Name: "prefix", Namespace: ns, ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := func(ctx context.Context, name string) error {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	until(t, "a missing param denies", func(ctx context.Context) bool {
		err := secret(ctx, "team-a-probe")
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "no params found for policy binding with `Deny` parameterNotFoundAction")
	})
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "prefix"}, Data: map[string]string{"prefix": "team-a-"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the param takes effect", func(ctx context.Context) bool { return secret(ctx, "team-a-1") == nil })
	err := secret(ctx, "other")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "secret names must start with team-a-") {
		t.Fatalf("secret without the prefix: %v", err)
	}
}

// A policy's param is a custom resource: configmaps may hold at most its spec.maxKeys
// keys; changing the param changes the limit.
func customResourceParam(t *testing.T, srv *testserver.Server, cs kubernetes.Interface) {
	ctx := context.Background()
	const ns = "crparam"
	namespace(t, cs, ns)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "limits.policy.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "policy.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "limits", Singular: "limit", Kind: "Limit", ListKind: "LimitList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{"maxKeys": {Type: "integer"}}}}}}}}}}
	ext := apiextensionsclient.NewForConfigOrDie(srv.Config(false))
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(srv.Config(false))
	limits := dyn.Resource(schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "limits"}).Namespace(ns)
	limit := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "policy.example.com/v1", "kind": "Limit",
		"metadata": map[string]any{"name": "small"}, "spec": map[string]any{"maxKeys": int64(1)}}}
	until(t, "the custom resource is served", func(ctx context.Context) bool {
		_, err := limits.Create(ctx, limit, metav1.CreateOptions{})
		return err == nil
	})
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "max-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind:        &admissionregistrationv1.ParamKind{APIVersion: "policy.example.com/v1", Kind: "Limit"},
			MatchConstraints: inNamespace(ns, "configmaps", admissionregistrationv1.Create),
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.data) || size(object.data) <= params.spec.maxKeys",
				Message: "too many keys"}}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "max-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "max-keys",
			ParamRef:          &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, ParameterNotFoundAction: ptr.To(admissionregistrationv1.AllowAction)},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if _, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	two := func(ctx context.Context) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "two-"},
			Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
		return err
	}
	until(t, "the custom resource param takes effect", func(ctx context.Context) bool {
		err := two(ctx)
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys' denied request: too many keys")
	})
	if err := unstructured.SetNestedField(limit.Object, int64(2), "spec", "maxKeys"); err != nil {
		t.Fatal(err)
	}
	cur, err := limits.Get(ctx, "small", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	limit.SetResourceVersion(cur.GetResourceVersion())
	if _, err := limits.Update(ctx, limit, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the raised limit takes effect", func(ctx context.Context) bool { return two(ctx) == nil })
}

// A mutating policy labels configmaps created through kubectl (ApplyConfiguration);
// another injects a sidecar container into pods (JSONPatch).
func mutatingPolicies(t *testing.T, srv *testserver.Server, cs kubernetes.Interface) {
	ctx := context.Background()
	const ns = "map"
	namespace(t, cs, ns)
	k := &policyKubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: ns}
	manifest := `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: label-owner
spec:
  matchConstraints:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: map
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  reinvocationPolicy: IfNeeded
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"created-by": "policy"}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: label-owner
spec:
  policyName: label-owner
`
	if _, stderr, err := k.run(ctx, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, stderr)
	}
	until(t, "the ApplyConfiguration policy takes effect", func(ctx context.Context) bool {
		cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err == nil && cm.Labels["created-by"] == "policy"
	})
	if _, stderr, err := k.run(ctx, "", "create", "configmap", "labelled"); err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, stderr)
	}
	out, stderr, err := k.run(ctx, "", "get", "configmap", "labelled", "-o", "jsonpath={.metadata.labels.created-by}")
	if err != nil || out != "policy" {
		t.Fatalf("created-by label of the configmap kubectl created: %q, %v\n%s", out, err, stderr)
	}

	sidecar := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sidecar"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: inNamespace(ns, "pods", admissionregistrationv1.Create),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConditions:    []admissionregistrationv1.MatchCondition{{Name: "no-sidecar-yet", Expression: "!object.spec.containers.exists(c, c.name == 'sidecar')"}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/spec/containers/-",
					value: Object.spec.containers{name: "sidecar", image: "example.com/sidecar:1"}}]`}}}}}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, sidecar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sidecar"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "sidecar"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	until(t, "the sidecar is injected", func(ctx context.Context) bool {
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "app-"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}, metav1.CreateOptions{})
		got = nil
		if err == nil {
			for _, c := range pod.Spec.Containers {
				got = append(got, c.Name+"="+c.Image)
			}
		}
		return strings.Join(got, ",") == "app=example.com/app:1,sidecar=example.com/sidecar:1"
	})
}
