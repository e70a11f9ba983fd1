package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/wasmplane/wasmplane/core/api"
	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
)

// DefaultKubeconfig is the admin kubeconfig `wasmplane up` writes in its default data dir.
const DefaultKubeconfig = ".wasmplane/admin.kubeconfig"

// ContentTypeWasm is the media type of a module upload.
const ContentTypeWasm = "application/wasm"

// KubeconfigPath picks the kubeconfig: the flag, else $KUBECONFIG, else the one
// `wasmplane up` writes in ./.wasmplane.
func KubeconfigPath(flag string) string {
	switch {
	case flag != "":
		return flag
	case os.Getenv("KUBECONFIG") != "":
		return os.Getenv("KUBECONFIG")
	}
	return DefaultKubeconfig
}

// Client talks to the wasmplane.io/v1alpha1 API of a cluster.
type Client struct {
	rc *rest.RESTClient
	// Namespace is the kubeconfig context's namespace ("default" when unset).
	Namespace string
}

// NewClient builds a REST client for wasmplane.io/v1alpha1 from a kubeconfig file.
func NewClient(kubeconfig string) (*Client, error) {
	kubeconfig = KubeconfigPath(kubeconfig)
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = metav1.NamespaceDefault
	}
	c, err := NewClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.Namespace = ns
	return c, nil
}

// NewClientForConfig builds a REST client for wasmplane.io/v1alpha1 from a rest.Config.
func NewClientForConfig(cfg *rest.Config) (*Client, error) {
	scheme, err := api.NewScheme()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	gv := wasmv1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = api.NewCodecs(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = "wasmplane-plugin"
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("REST client: %w", err)
	}
	return &Client{rc: rc, Namespace: metav1.NamespaceDefault}, nil
}

// Push uploads module bytes to the cluster's module store. created is false when the
// store already held them (the server answers 200 instead of 201).
func (c *Client) Push(ctx context.Context, module []byte) (m *wasmv1.WasmModule, created bool, err error) {
	return c.PushIn(ctx, module, "")
}

// PushIn is Push recording that namespace's WasmPlugins may run the module (the server
// lets a namespaced plugin run only modules shared with its namespace); "" records
// nothing, for cluster plugins.
func (c *Client) PushIn(ctx context.Context, module []byte, namespace string) (m *wasmv1.WasmModule, created bool, err error) {
	var code int
	m = &wasmv1.WasmModule{}
	req := c.rc.Post().Resource("wasmmodules").SetHeader("Content-Type", ContentTypeWasm)
	if namespace != "" {
		req = req.Param("namespace", namespace)
	}
	err = req.Body(module).Do(ctx).StatusCode(&code).Into(m)
	if err != nil {
		return nil, false, fmt.Errorf("pushing the module: %w", err)
	}
	if !strings.HasPrefix(m.Spec.Digest, "sha256:") {
		return nil, false, fmt.Errorf("pushing the module: the server answered no digest (%q)", m.Spec.Digest)
	}
	return m, code == http.StatusCreated, nil
}

// ModuleBlob downloads a stored module's bytes by digest ("sha256:<hex>" or "<hex>").
func (c *Client) ModuleBlob(ctx context.Context, digest string) ([]byte, error) {
	name := "sha256-" + strings.TrimPrefix(digest, "sha256:")
	b, err := c.rc.Get().Resource("wasmmodules").Name(name).SubResource("blob").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("downloading module %s: %w", digest, err)
	}
	return b, nil
}

// ApplyOptions describe a plugin object; Spec must already pin the module.
type ApplyOptions struct {
	// Name is the object's name.
	Name string
	// Namespace makes a WasmPlugin; empty makes a ClusterWasmPlugin.
	Namespace string
	// Spec is the whole desired spec (it replaces the existing one).
	Spec wasmv1.WasmPluginSpec
}

// Apply creates the plugin object or replaces the spec of the existing one, keeping its
// other metadata, and returns what it did: "created", "configured" or "unchanged".
func (c *Client) Apply(ctx context.Context, o ApplyOptions) (string, runtime.Object, error) {
	// The server writes the plugin's status after every load, which moves its
	// resourceVersion: an update that loses that race is simply made again on a fresh
	// read, as kubectl apply does; the spec is entirely the caller's, so nothing is lost.
	var action string
	var obj runtime.Object
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		action, obj, err = c.applyOnce(ctx, o)
		return err
	})
	return action, obj, err
}

// withServerDefaults fills the limits the caller left unset with the stored ones: the
// server defaults a namespaced plugin's unset limits into the object, and applying the
// same flags again must not count as a change.
func withServerDefaults(want, stored *wasmv1.Limits) *wasmv1.Limits {
	if stored == nil {
		return want
	}
	out := *stored
	if want == nil {
		return &out
	}
	if want.MemoryPages != 0 {
		out.MemoryPages = want.MemoryPages
	}
	if want.Timeout != nil {
		out.Timeout = want.Timeout
	}
	if want.MaxInputBytes != 0 {
		out.MaxInputBytes = want.MaxInputBytes
	}
	if want.MaxOutputBytes != 0 {
		out.MaxOutputBytes = want.MaxOutputBytes
	}
	if want.MaxInstances != 0 {
		out.MaxInstances = want.MaxInstances
	}
	return &out
}

// applyOnce is one read-compare-write round of Apply.
func (c *Client) applyOnce(ctx context.Context, o ApplyOptions) (string, runtime.Object, error) {
	resource, kind := "clusterwasmplugins", "ClusterWasmPlugin"
	var obj, existing interface {
		runtime.Object
		metav1.Object
	}
	var specOf func(runtime.Object) *wasmv1.WasmPluginSpec
	if o.Namespace != "" {
		resource, kind = "wasmplugins", "WasmPlugin"
		obj, existing = &wasmv1.WasmPlugin{}, &wasmv1.WasmPlugin{}
		specOf = func(r runtime.Object) *wasmv1.WasmPluginSpec { return &r.(*wasmv1.WasmPlugin).Spec }
	} else {
		obj, existing = &wasmv1.ClusterWasmPlugin{}, &wasmv1.ClusterWasmPlugin{}
		specOf = func(r runtime.Object) *wasmv1.WasmPluginSpec { return &r.(*wasmv1.ClusterWasmPlugin).Spec }
	}
	what := strings.ToLower(kind) + ".wasmplane.io/" + o.Name
	err := c.rc.Get().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(resource).Name(o.Name).Do(ctx).Into(existing)
	switch {
	case apierrors.IsNotFound(err):
		obj.SetName(o.Name)
		obj.SetNamespace(o.Namespace)
		*specOf(obj) = o.Spec
		obj.GetObjectKind().SetGroupVersionKind(wasmv1.SchemeGroupVersion.WithKind(kind))
		err = c.rc.Post().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(resource).Body(obj).Do(ctx).Into(obj)
		if err != nil {
			return "", nil, fmt.Errorf("creating %s: %w", what, err)
		}
		return "created", obj, nil
	case err != nil:
		return "", nil, fmt.Errorf("reading %s: %w", what, err)
	}
	want := o.Spec
	want.Limits = withServerDefaults(o.Spec.Limits, specOf(existing).Limits)
	if reflect.DeepEqual(*specOf(existing), want) {
		return "unchanged", existing, nil
	}
	*specOf(existing) = want
	existing.GetObjectKind().SetGroupVersionKind(wasmv1.SchemeGroupVersion.WithKind(kind))
	// The update carries the resourceVersion read above: a concurrent writer makes it
	// fail with a Conflict instead of being overwritten.
	err = c.rc.Put().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(resource).Name(o.Name).Body(existing).Do(ctx).Into(obj)
	if err != nil {
		return "", nil, fmt.Errorf("updating %s: %w", what, err)
	}
	return "configured", obj, nil
}

// SpecOptions are the flag values of `plugin apply` that make a plugin spec.
type SpecOptions struct {
	// Digest is the module's "sha256:<hex>".
	Digest string
	// Hooks are hook names, each item possibly comma-separated.
	Hooks []string
	// Rules are "resources:OPERATIONS" items, e.g. "pods:CREATE,UPDATE" or "deployments.apps:*".
	Rules []string
	// Config is the JSON passed to configure (nil: none).
	Config json.RawMessage
	// FailurePolicy is "Fail", "Ignore" or "" (the server's default).
	FailurePolicy string
	// ReinvocationPolicy is "IfNeeded", "Never" or "" (the server's default, IfNeeded).
	ReinvocationPolicy string
	// Initializer is the initializer name an initialize hook serves.
	Initializer string
	// Profiles are the scheduler profiles filter/score join.
	Profiles []string
	// Weight is the score weight; 0 leaves the server's default.
	Weight int32
}

// BuildSpec turns flag values into a WasmPluginSpec pinning the digest in both
// spec.module.digest and spec.sha256, as the server requires.
func BuildSpec(o SpecOptions) (wasmv1.WasmPluginSpec, error) {
	var spec wasmv1.WasmPluginSpec
	hex := strings.TrimPrefix(o.Digest, "sha256:")
	if len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return spec, fmt.Errorf("digest %q: want sha256:<64 lowercase hex digits>", o.Digest)
	}
	spec.Module.Digest, spec.SHA256 = "sha256:"+hex, hex
	hooks, err := ParseHooks(o.Hooks)
	if err != nil {
		return spec, err
	}
	for _, h := range hooks {
		spec.Hooks = append(spec.Hooks, wasmv1.Hook(h))
	}
	for _, r := range o.Rules {
		rule, err := ParseRule(r)
		if err != nil {
			return spec, err
		}
		spec.Rules = append(spec.Rules, rule)
	}
	if len(o.Config) > 0 {
		spec.Config = &runtime.RawExtension{Raw: o.Config}
	}
	if o.FailurePolicy != "" {
		fp := wasmv1.FailurePolicy(o.FailurePolicy)
		if fp != wasmv1.Fail && fp != wasmv1.Ignore {
			return spec, fmt.Errorf("failure policy %q: want Fail or Ignore", o.FailurePolicy)
		}
		spec.FailurePolicy = &fp
	}
	if o.ReinvocationPolicy != "" {
		rp := wasmv1.ReinvocationPolicy(o.ReinvocationPolicy)
		if rp != wasmv1.IfNeeded && rp != wasmv1.Never {
			return spec, fmt.Errorf("reinvocation policy %q: want IfNeeded or Never", o.ReinvocationPolicy)
		}
		spec.ReinvocationPolicy = rp
	}
	spec.Initializer = o.Initializer
	if len(o.Profiles) > 0 || o.Weight != 0 {
		if o.Weight < 0 {
			return spec, fmt.Errorf("weight %d: must not be negative", o.Weight)
		}
		spec.Scheduler = &wasmv1.SchedulerBinding{Profiles: o.Profiles, Weight: o.Weight}
	}
	return spec, nil
}

// ParseRule reads "resource[.group][,resource…]:OP[,OP…]": "pods:CREATE,UPDATE",
// "deployments.apps:*", "pods" (all operations). Versions are "*"; the group of a bare
// resource is the core group "".
func ParseRule(s string) (wasmv1.Rule, error) {
	var r wasmv1.Rule
	res, ops, _ := strings.Cut(s, ":")
	if strings.TrimSpace(res) == "" {
		return r, fmt.Errorf("rule %q: want resources:OPERATIONS, e.g. pods:CREATE,UPDATE", s)
	}
	groups := map[string]bool{}
	for _, item := range strings.Split(res, ",") {
		item = strings.TrimSpace(item)
		name, group, _ := strings.Cut(item, ".")
		if name == "" {
			return r, fmt.Errorf("rule %q: empty resource", s)
		}
		if !groups[group] {
			groups[group] = true
			r.APIGroups = append(r.APIGroups, group)
		}
		r.Resources = append(r.Resources, name)
	}
	if item := strings.TrimSpace(res); item == "*" || item == "*/*" {
		r.APIGroups = []string{"*"}
	}
	r.APIVersions = []string{"*"}
	if ops == "" {
		ops = "*"
	}
	for _, op := range strings.Split(ops, ",") {
		o := wasmv1.Operation(strings.ToUpper(strings.TrimSpace(op)))
		switch o {
		case wasmv1.OperationAll, wasmv1.OperationCreate, wasmv1.OperationUpdate, wasmv1.OperationDelete, wasmv1.OperationConnect:
			r.Operations = append(r.Operations, o)
		default:
			return r, fmt.Errorf("rule %q: operation %q: want *, CREATE, UPDATE, DELETE or CONNECT", s, op)
		}
	}
	return r, nil
}

// ErrNoModule is returned by ResolveModule when neither a file nor a digest is given.
var ErrNoModule = errors.New("give --module FILE or --digest sha256:<hex>")

// ResolveModule returns the digest to pin: it pushes file when given (so the cluster has
// the bytes, shared with namespace; the stored module and whether it was new are
// returned), or normalizes digest.
func (c *Client) ResolveModule(ctx context.Context, file, digest, namespace string) (string, *wasmv1.WasmModule, bool, error) {
	switch {
	case file != "" && digest != "":
		return "", nil, false, errors.New("give --module or --digest, not both")
	case file != "":
		b, err := os.ReadFile(filepath.Clean(file))
		if err != nil {
			return "", nil, false, fmt.Errorf("reading the module: %w", err)
		}
		m, created, err := c.PushIn(ctx, b, namespace)
		if err != nil {
			return "", nil, false, err
		}
		return m.Spec.Digest, m, created, nil
	case digest != "":
		if !strings.HasPrefix(digest, "sha256:") {
			digest = "sha256:" + digest
		}
		return digest, nil, false, nil
	}
	return "", nil, false, ErrNoModule
}

// InstallOptions are what `plugin apply` asks for.
type InstallOptions struct {
	// Name is the plugin object's name.
	Name string
	// Namespace makes a WasmPlugin; empty makes a ClusterWasmPlugin.
	Namespace string
	// ModuleFile is pushed and pinned; else Spec.Digest names a module already pushed.
	ModuleFile string
	// Spec holds the flag values of the spec.
	Spec SpecOptions
}

// InstallReport says what Install did.
type InstallReport struct {
	// Module is the stored module when a file was pushed; Stored tells whether the
	// push added it (false: the cluster already had it).
	Module *wasmv1.WasmModule
	Stored bool
	// Resource is "wasmplugin" or "clusterwasmplugin"; Action "created", "configured"
	// or "unchanged".
	Resource, Action string
	// Spec is the spec applied.
	Spec wasmv1.WasmPluginSpec
}

// Install checks the options, pushes the module if a file is given, then creates or
// updates the plugin object pinning it. Flags are checked before anything is uploaded.
func (c *Client) Install(ctx context.Context, o InstallOptions) (*InstallReport, error) {
	check := o.Spec
	if check.Digest == "" {
		check.Digest = "sha256:" + strings.Repeat("0", 64) // a stand-in until the push
	}
	if _, err := BuildSpec(check); err != nil {
		return nil, err
	}
	digest, m, stored, err := c.ResolveModule(ctx, o.ModuleFile, o.Spec.Digest, o.Namespace)
	if err != nil {
		return nil, err
	}
	o.Spec.Digest = digest
	spec, err := BuildSpec(o.Spec)
	if err != nil {
		return nil, err
	}
	action, _, err := c.Apply(ctx, ApplyOptions{Name: o.Name, Namespace: o.Namespace, Spec: spec})
	if err != nil {
		return nil, err
	}
	r := &InstallReport{Module: m, Stored: stored, Resource: "clusterwasmplugin", Action: action, Spec: spec}
	if o.Namespace != "" {
		r.Resource = "wasmplugin"
	}
	return r, nil
}
