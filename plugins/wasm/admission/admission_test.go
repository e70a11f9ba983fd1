package admission_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/admission"
	"github.com/wasmplane/wasmplane/core/trace"
	"github.com/wasmplane/wasmplane/plugins/wasm"
	wasmadmission "github.com/wasmplane/wasmplane/plugins/wasm/admission"
	"github.com/wasmplane/wasmplane/plugins/wasm/wasmtest"
	"github.com/wasmplane/wasmplane/sdk/go/abi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMain(m *testing.M) { wasmtest.Main(m) }

// caller answers the hooks with fixed responses.
type caller struct {
	mutate   abi.MutateResponse
	validate abi.ValidateResponse
	err      error
	// last is the request of the last call.
	last *abi.AdmissionRequest
}

func (c *caller) Mutate(_ context.Context, req *abi.AdmissionRequest) (*abi.MutateResponse, error) {
	c.last = req
	return &c.mutate, c.err
}

func (c *caller) Validate(_ context.Context, req *abi.AdmissionRequest) (*abi.ValidateResponse, error) {
	c.last = req
	return &c.validate, c.err
}

// encodedCaller is a caller that takes encoded requests, as *wasm.Plugin does; mutate, if
// set, answers the mutate hook.
type encodedCaller struct {
	caller
	mutateFn func(req []byte) abi.MutateResponse
	// raw are the requests received, in order.
	raw [][]byte
	// form is what the module asked for in its configure answer, and members what of
	// the request it reads (nil: all of it).
	form    wasm.ObjectForm
	members *wasm.Members
}

// The adapter finds the encoded path by a type assertion: a test caller that fell out of
// step with the interface would quietly test the other path.
var (
	_ wasmadmission.EncodedCaller = (*encodedCaller)(nil)
	_ wasmadmission.EncodedCaller = (*uidRecorder)(nil)
	_ wasmadmission.EncodedCaller = allowingCaller{}
)

func (c *encodedCaller) MutateJSON(_ context.Context, req []byte) (*abi.MutateResponse, error) {
	c.raw = append(c.raw, req)
	if c.mutateFn != nil {
		r := c.mutateFn(req)
		return &r, c.err
	}
	return &c.mutate, c.err
}

func (c *encodedCaller) ValidateJSON(_ context.Context, build func(dst []byte, form wasm.RequestForm) ([]byte, error)) (*abi.ValidateResponse, error) {
	req, err := build(nil, wasm.RequestForm{Objects: c.form, Members: c.members})
	if err != nil {
		return nil, err
	}
	c.raw = append(c.raw, req)
	return &c.validate, c.err
}

// requestVariants are changes to attrs() that reach every member of a request: each
// operation, a subresource, odd names and users, dry runs, typed objects.
func requestVariants() map[string]func(a *admission.Attributes) {
	return map[string]func(a *admission.Attributes){
		"create": func(*admission.Attributes) {},
		"update": func(a *admission.Attributes) {
			a.Operation, a.Subresource = admission.Update, "status"
			a.OldObject = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"a": "<b>&"}}}
			a.User = admission.UserInfo{Name: "alice", UID: "7", Groups: []string{"dev"}, Extra: map[string][]string{"scopes": {"x"}}}
			a.DryRun = true
		},
		"delete": func(a *admission.Attributes) {
			a.Operation, a.OldObject, a.Object = admission.Delete, a.Object, nil
		},
		"cluster-scoped, odd user": func(a *admission.Attributes) {
			a.Namespace, a.Name, a.Subresource = "", "<x>&\"y\"", ""
			a.User = admission.UserInfo{Name: "ü\u2028\n", Groups: []string{}, Extra: map[string][]string{"b": nil, "a": {}, "c<": {"1", "\x00"}}}
		},
		"typed": func(a *admission.Attributes) {
			a.Object.(*corev1.Pod).TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		},
	}
}

// TestRequestJSON checks that the encoded request is, byte for byte, what encoding/json
// writes for the request a plain Caller receives.
func TestRequestJSON(t *testing.T) {
	for name, change := range requestVariants() {
		t.Run(name, func(t *testing.T) {
			plain, enc := &caller{validate: abi.ValidateResponse{Allowed: true}}, &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}}
			for _, c := range []wasmadmission.Caller{plain, enc} {
				a := attrs()
				change(a)
				if err := (&wasmadmission.Plugin{PluginName: "p", Caller: c}).Validate(context.Background(), a); err != nil {
					t.Fatal(err)
				}
			}
			var got abi.AdmissionRequest
			if err := json.Unmarshal(enc.raw[0], &got); err != nil {
				t.Fatalf("%s: %v", enc.raw[0], err)
			}
			if got.UID == "" || got.UID == plain.last.UID {
				t.Fatalf("uid %q, want a fresh one", got.UID)
			}
			want := *plain.last
			want.UID = got.UID
			wantJSON, _ := json.Marshal(want)
			if string(enc.raw[0]) != string(wantJSON) {
				t.Fatalf("encoded request\n got %s\nwant %s", enc.raw[0], wantJSON)
			}
		})
	}
}

// TestRequestMembers: a request written with only the members a policy reads
// (RequestForm.Members, a recorded Rego policy's reads) holds, at every path the policy
// reads, what the whole request holds there, and nothing else down to the members of the
// objects' metadata; the other members, and those of metadata, it holds whole.
func TestRequestMembers(t *testing.T) {
	variants := requestVariants()
	variants["config map, escapes"] = func(a *admission.Attributes) {
		a.Kind, a.Resource = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		a.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", GenerateName: "c-", UID: "u-1",
			Labels: map[string]string{"a<b": "x&y", "team": "é\u2028"}, Annotations: map[string]string{"note": `"quoted"`}}, Data: map[string]string{"k": "v"}}
	}
	variants["custom object, update"] = func(a *admission.Attributes) {
		a.Kind, a.Resource = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		a.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{"size": int64(3)},
			"metadata": map[string]any{"name": "w", "labels": map[string]any{}, "annotations": map[string]any{"team": "t"}, "resourceVersion": "7"}}}
		a.Operation, a.OldObject = admission.Update, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"}}
	}
	reads := []struct {
		name  string
		paths [][]string
	}{
		{"labels", [][]string{{"object", "metadata", "labels"}}},
		{"one label", [][]string{{"object", "metadata", "labels", "team"}}},
		{"old and new names", [][]string{{"object", "metadata", "name"}, {"object", "metadata", "generateName"}, {"oldObject", "metadata", "name"}, {"oldObject", "metadata", "generateName"}}},
		{"kinds", [][]string{{"object", "apiVersion"}, {"object", "kind"}, {"kind"}}},
		{"all the metadata document", [][]string{{"object", "metadata"}, {"oldObject"}}},
		{"who and how", [][]string{{"operation"}, {"userInfo", "username"}, {"uid"}, {"dryRun"}, {"namespace"}, {"name"}, {"subResource"}, {"resource"}}},
		{"uid and annotations", [][]string{{"uid"}, {"object", "metadata", "annotations"}, {"object", "metadata", "uid"}}},
		{"nothing", nil},
	}
	for name, change := range variants {
		for _, rd := range reads {
			t.Run(name+"/"+rd.name, func(t *testing.T) {
				checkRequestMembers(t, wasm.ObjectMetadata, change, rd.paths, unkept)
			})
		}
	}
}

// checkRequestMembers writes the request attrs() changed by change in form twice, whole
// and with the members at paths alone, and checks that the second has what the first has
// at every path, and that unkept finds nothing in it the members do not keep.
func checkRequestMembers(t *testing.T, form wasm.ObjectForm, change func(*admission.Attributes), paths [][]string, unkept func(map[string]any, *wasm.Members) string) {
	t.Helper()
	members := wasm.MembersOf(paths...)
	full := &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: form}
	kept := &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: form, members: members}
	var docs []map[string]any
	for _, c := range []*encodedCaller{full, kept} {
		a := attrs()
		change(a)
		if err := (&wasmadmission.Plugin{PluginName: "p", Caller: c}).Validate(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(c.raw[0], &doc); err != nil {
			t.Fatalf("%s: %v", c.raw[0], err)
		}
		// Each call has a uid of its own.
		if uid, ok := doc["uid"].(string); ok {
			doc["uid"] = len(uid) == 36
		}
		docs = append(docs, doc)
	}
	if got, want := pick(docs[1], paths), pick(docs[0], paths); !reflect.DeepEqual(got, want) {
		t.Errorf("at the paths read, the request written with their members alone has\n%v\nthe whole request\n%v\n(written: %s)", got, want, kept.raw[0])
	}
	if extra := unkept(docs[1], members); extra != "" {
		t.Errorf("written with %s, which is not read: %s", extra, kept.raw[0])
	}
}

// TestRequestMembersCompactPods is TestRequestMembers for a module that reads pods as
// compact pod documents and declared what it reads: of the pods, the members of the
// document, of its metadata and of its spec that it keeps are written, each whole.
func TestRequestMembersCompactPods(t *testing.T) {
	variants := requestVariants()
	variants["scheduling fields"] = func(a *admission.Attributes) {
		pod := a.Object.(*corev1.Pod)
		seconds, priority := int64(30), int32(7)
		pod.Labels, pod.Annotations = map[string]string{"team": "a"}, map[string]string{"note": "n", corev1.LastAppliedConfigAnnotation: "{}"}
		pod.UID, pod.ResourceVersion = "u-1", "12"
		pod.Spec.NodeName, pod.Spec.SchedulerName, pod.Spec.PriorityClassName, pod.Spec.Priority = "n1", "s", "high", &priority
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
		pod.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds}}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}}
	}
	reads := []struct {
		name  string
		paths [][]string
	}{
		{"labels and images", [][]string{{"operation"}, {"kind"}, {"object", "metadata", "labels"}, {"object", "spec", "containers"}, {"object", "spec", "initContainers"}}},
		{"scheduling", [][]string{{"object", "spec", "nodeName"}, {"object", "spec", "nodeSelector"}, {"object", "spec", "schedulerName"}, {"object", "spec", "priorityClassName"},
			{"object", "spec", "priority"}, {"object", "spec", "tolerations"}, {"object", "spec", "affinity"}}},
		{"metadata and the old spec", [][]string{{"object", "metadata"}, {"oldObject", "spec"}, {"oldObject", "apiVersion"}}},
		{"names", [][]string{{"object", "metadata", "name"}, {"object", "metadata", "namespace"}, {"object", "metadata", "uid"}, {"object", "metadata", "resourceVersion"}, {"object", "metadata", "annotations"}}},
		{"kinds", [][]string{{"object", "apiVersion"}, {"object", "kind"}, {"resource"}}},
		{"whole objects", [][]string{{"object"}, {"oldObject"}, {"userInfo"}}},
		{"nothing", nil},
	}
	// Below object and oldObject, and below their metadata and spec, only what is kept.
	unkeptCompact := func(doc map[string]any, members *wasm.Members) string {
		return unkeptBelow(doc, members, func(path []string) bool {
			return len(path) == 1 && (path[0] == "object" || path[0] == "oldObject") || len(path) == 2 && (path[1] == "metadata" || path[1] == "spec")
		}, nil)
	}
	for name, change := range variants {
		for _, rd := range reads {
			t.Run(name+"/"+rd.name, func(t *testing.T) {
				checkRequestMembers(t, wasm.CompactPods, change, rd.paths, unkeptCompact)
			})
		}
	}
}

// pick returns what doc holds at each of paths, as a document of those paths alone.
func pick(doc map[string]any, paths [][]string) map[string]any {
	out := map[string]any{}
	for _, path := range paths {
		var v any = doc
		for _, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if v == nil {
			continue
		}
		dst := out
		for _, k := range path[:len(path)-1] {
			next, ok := dst[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				dst[k] = next
			}
			dst = next
		}
		dst[path[len(path)-1]] = v
	}
	return out
}

// unkept names a member of the request doc that members does not keep, or of its
// objects or their metadata; "" if none. The other members are written whole.
func unkept(doc map[string]any, members *wasm.Members) string {
	return unkeptBelow(doc, members, func(path []string) bool {
		return len(path) == 1 && (path[0] == "object" || path[0] == "oldObject") || len(path) == 2 && path[1] == "metadata"
	}, nil)
}

// unkeptBelow is unkept for the member at path, descending where descend says.
func unkeptBelow(doc map[string]any, members *wasm.Members, descend func(path []string) bool, path []string) string {
	for k, v := range doc {
		kid, ok := members.Member(k)
		if !ok {
			return strings.Join(append(path, k), ".")
		}
		sub := append(slices.Clone(path), k)
		if m, isMap := v.(map[string]any); isMap && kid != nil && descend(sub) {
			if extra := unkeptBelow(m, kid, descend, sub); extra != "" {
				return extra
			}
		}
	}
	return ""
}

// TestRequestUIDs checks the uids the adapter gives calls: each call's is its own and a
// version-4 UUID, from one plugin and across plugins, on the same request and across
// concurrent calls.
func TestRequestUIDs(t *testing.T) {
	tests := []struct {
		name             string
		plugins, callers int
		calls            int // per caller
	}{
		{"one plugin, one request after another", 1, 1, 1000},
		{"plugins on the same requests", 5, 1, 200},
		{"concurrent callers", 2, 8, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &uidRecorder{seen: map[string]bool{}}
			plugins := make([]*wasmadmission.Plugin, tt.plugins)
			for i := range plugins {
				plugins[i] = &wasmadmission.Plugin{PluginName: fmt.Sprintf("p%d", i), Caller: rec}
			}
			var wg sync.WaitGroup
			for range tt.callers {
				wg.Go(func() {
					for range tt.calls {
						a := attrs() // one request, seen by every plugin
						for _, p := range plugins {
							if err := p.Validate(context.Background(), a); err != nil {
								t.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, err := range rec.errs {
				t.Error(err)
			}
			if want := tt.plugins * tt.callers * tt.calls; len(rec.seen) != want {
				t.Errorf("%d distinct uids, want %d", len(rec.seen), want)
			}
		})
	}
}

// uuidV4 matches the text of a version-4 UUID.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// uidRecorder is an EncodedCaller, safe for concurrent calls, that allows every request
// and records its uid, and what was wrong with it.
type uidRecorder struct {
	caller
	mu   sync.Mutex
	seen map[string]bool
	errs []error
}

func (r *uidRecorder) MutateJSON(context.Context, []byte) (*abi.MutateResponse, error) {
	return &abi.MutateResponse{Allowed: true}, nil
}

func (r *uidRecorder) ValidateJSON(_ context.Context, build func(dst []byte, form wasm.RequestForm) ([]byte, error)) (*abi.ValidateResponse, error) {
	raw, err := build(nil, wasm.RequestForm{Objects: wasm.CompactPods})
	if err != nil {
		return nil, err
	}
	var req abi.AdmissionRequest
	err = json.Unmarshal(raw, &req)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.errs = append(r.errs, err)
	case !uuidV4.MatchString(req.UID):
		r.errs = append(r.errs, fmt.Errorf("uid %q is not a version-4 UUID", req.UID))
	case r.seen[req.UID]:
		r.errs = append(r.errs, fmt.Errorf("uid %q given twice", req.UID))
	}
	r.seen[req.UID] = true
	return &abi.ValidateResponse{Allowed: true}, nil
}

// source is an admission.Source of fixed plugins.
type source struct {
	ms []admission.Mutator
	vs []admission.Validator
}

func (s source) Acquire(*admission.Attributes) ([]admission.Mutator, []admission.Validator, func()) {
	return s.ms, s.vs, func() {}
}

// TestSharedEncoding checks what the plugins of one request see when the chain shares
// the request's encoding: each call its own uid; in the mutating phase, the object as
// the plugins before changed it.
func TestSharedEncoding(t *testing.T) {
	withoutUID := func(t *testing.T, raw []byte) (uid, rest string) {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		uid = m["uid"].(string)
		delete(m, "uid")
		b, _ := json.Marshal(m)
		return uid, string(b)
	}
	t.Run("validate", func(t *testing.T) {
		cs := []*encodedCaller{{}, {}, {}}
		var vs []admission.Validator
		for i, c := range cs {
			c.validate = abi.ValidateResponse{Allowed: true}
			vs = append(vs, &wasmadmission.Plugin{PluginName: fmt.Sprint("v", i), Caller: c})
		}
		chain := &admission.Chain{Sources: []admission.Source{source{vs: vs}}}
		for range 2 {
			if err := chain.Validate(context.Background(), attrs()); err != nil {
				t.Fatal(err)
			}
		}
		uids := map[string]bool{}
		var first string
		for _, c := range cs {
			for _, raw := range c.raw {
				uid, rest := withoutUID(t, raw)
				uids[uid] = true
				if first == "" {
					first = rest
				} else if rest != first {
					t.Fatalf("requests differ:\n%s\n%s", rest, first)
				}
			}
		}
		if len(uids) != 6 {
			t.Fatalf("%d distinct uids in 6 calls", len(uids))
		}
		// A lone validator writes its request where the plugin reads it, without the
		// shared copy: the same request, in every form, and a fresh uid.
		for _, form := range []wasm.ObjectForm{wasm.WholeObjects, wasm.CompactPods, wasm.ObjectMetadata} {
			lone := &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: form}
			many := &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: form}
			chain := &admission.Chain{Sources: []admission.Source{source{vs: []admission.Validator{&wasmadmission.Plugin{PluginName: "lone", Caller: lone}}}}}
			if err := chain.Validate(context.Background(), attrs()); err != nil {
				t.Fatal(err)
			}
			chain = &admission.Chain{Sources: []admission.Source{source{vs: []admission.Validator{
				&wasmadmission.Plugin{PluginName: "a", Caller: many},
				&wasmadmission.Plugin{PluginName: "b", Caller: &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: form}},
			}}}}
			if err := chain.Validate(context.Background(), attrs()); err != nil {
				t.Fatal(err)
			}
			uid, rest := withoutUID(t, lone.raw[0])
			_, shared := withoutUID(t, many.raw[0])
			if rest != shared || uids[uid] {
				t.Fatalf("form %d: lone request %s (uid %s), shared %s", form, rest, uid, shared)
			}
		}
	})
	t.Run("mutate", func(t *testing.T) {
		labels := func(raw []byte) map[string]any {
			var r abi.AdmissionRequest
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			md := mapOf(t, r.Object)["metadata"].(map[string]any)
			l, _ := md["labels"].(map[string]any)
			return l
		}
		// The first plugin adds a label the second one checks for; the third sees the
		// object as the second left it (unchanged).
		addLabel := &encodedCaller{mutateFn: func(raw []byte) abi.MutateResponse {
			if labels(raw)["team"] != nil {
				return abi.MutateResponse{Allowed: true}
			}
			return abi.MutateResponse{Allowed: true, Patch: []abi.PatchOperation{{Op: "add", Path: "/metadata/labels", Value: json.RawMessage(`{"team":"web"}`)}}}
		}}
		second := &encodedCaller{caller: caller{mutate: abi.MutateResponse{Allowed: true}}}
		third := &encodedCaller{caller: caller{mutate: abi.MutateResponse{Allowed: true}}}
		chain := &admission.Chain{Sources: []admission.Source{source{ms: []admission.Mutator{
			&wasmadmission.Plugin{PluginName: "add", Caller: addLabel},
			&wasmadmission.Plugin{PluginName: "second", Caller: second},
			&wasmadmission.Plugin{PluginName: "third", Caller: third},
		}}}}
		a := attrs()
		if err := chain.Admit(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		if labels(addLabel.raw[0])["team"] != nil {
			t.Fatal("the first plugin saw the label before adding it")
		}
		if len(second.raw) != 1 || labels(second.raw[0])["team"] != "web" || labels(third.raw[0])["team"] != "web" {
			t.Fatalf("later plugins did not see the label: %s", second.raw)
		}
		_, r2 := withoutUID(t, second.raw[0])
		_, r3 := withoutUID(t, third.raw[0])
		if r2 != r3 {
			t.Fatalf("unchanged object, different requests:\n%s\n%s", r2, r3)
		}
		// Outside a chain nothing is kept: a changed object is seen at once.
		p := &wasmadmission.Plugin{PluginName: "alone", Caller: second}
		_ = p.Validate(context.Background(), a)
		a.Object.(*corev1.Pod).Labels["team"] = "db"
		_ = p.Validate(context.Background(), a)
		if got := labels(second.raw[len(second.raw)-1])["team"]; got != "db" {
			t.Fatalf("outside a chain: label %v, want db", got)
		}
	})
}

func TestRequest(t *testing.T) {
	c := &caller{validate: abi.ValidateResponse{Allowed: true}}
	p := &wasmadmission.Plugin{PluginName: "p", Caller: c}
	a := attrs()
	a.OldObject = &corev1.Pod{}
	a.User = admission.UserInfo{Name: "alice", Groups: []string{"dev"}}
	a.DryRun = true
	if err := p.Validate(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	r := c.last
	if r.Operation != "CREATE" || r.Namespace != "ns" || r.Name != "web" || r.Kind.Kind != "Pod" || r.Resource.Resource != "pods" ||
		r.UserInfo.Username != "alice" || !r.DryRun || r.UID == "" {
		t.Fatalf("request %+v", r)
	}
	// Objects without TypeMeta (as stored) get apiVersion and kind, as a webhook sees them.
	for name, raw := range map[string]json.RawMessage{"object": r.Object, "oldObject": r.OldObject} {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %v", name, raw, err)
		}
		if m["apiVersion"] != "v1" || m["kind"] != "Pod" || m["metadata"] == nil {
			t.Fatalf("%s = %s, want apiVersion v1, kind Pod and the object's members", name, raw)
		}
	}
	if md := mapOf(t, r.Object)["metadata"].(map[string]any); md["name"] != "web" {
		t.Fatalf("object metadata %v", md)
	}
}

func mapOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func attrs() *admission.Attributes {
	return &admission.Attributes{Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: "ns", Name: "web", Operation: admission.Create,
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}}
}

func TestWarningsAndAuditAnnotations(t *testing.T) {
	for _, hook := range []string{"mutate", "validate"} {
		for _, allowed := range []bool{true, false} {
			t.Run(hook+map[bool]string{true: " allowed", false: " denied"}[allowed], func(t *testing.T) {
				c := &caller{
					mutate:   abi.MutateResponse{Allowed: allowed, Code: 422, Message: "no", Warnings: []string{"w1", "w2"}, AuditAnnotations: map[string]string{"b": "2", "a": "1"}},
					validate: abi.ValidateResponse{Allowed: allowed, Code: 422, Message: "no", Warnings: []string{"w1", "w2"}, AuditAnnotations: map[string]string{"b": "2", "a": "1"}},
				}
				p := &wasmadmission.Plugin{PluginName: "ns/p", Caller: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
				tr := &trace.Trace{}
				ctx, warnings := admission.WithWarnings(trace.With(context.Background(), tr))
				var err error
				if hook == "mutate" {
					err = p.Admit(ctx, attrs())
				} else {
					err = p.Validate(ctx, attrs())
				}
				if allowed && err != nil {
					t.Fatal(err)
				}
				if !allowed && (!apierrors.IsInvalid(err) || err.Error() != `admission plugin "ns/p" denied the request: no`) {
					t.Fatalf("got %v, want 422 with the plugin's message", err)
				}
				if w := warnings(); !slices.Equal(w, []string{"w1", "w2"}) {
					t.Fatalf("warnings %q", w)
				}
				var audit []string
				for _, s := range tr.Steps() {
					if s.Result == "audit annotation" && s.Step == "ns/p" && s.Component == "admission" {
						audit = append(audit, s.Detail)
					}
				}
				if !slices.Equal(audit, []string{"ns/p/a=1", "ns/p/b=2"}) {
					t.Fatalf("audit annotations in the trace: %q", audit)
				}
			})
		}
	}
}

func TestReinvocationPolicy(t *testing.T) {
	if !(&wasmadmission.Plugin{}).Reinvoke() {
		t.Fatal("IfNeeded is the default")
	}
	if (&wasmadmission.Plugin{NoReinvocation: true}).Reinvoke() {
		t.Fatal("Never must not reinvoke")
	}
}

func TestPatchChecks(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name    string
		patch   []abi.PatchOperation
		ignore  bool
		wantErr string
		label   string
	}{
		{name: "label added", patch: []abi.PatchOperation{{Op: "add", Path: "/metadata/labels", Value: raw(`{"x":"y"}`)}}, label: "y"},
		{name: "name is immutable", patch: []abi.PatchOperation{{Op: "replace", Path: "/metadata/name", Value: raw(`"other"`)}},
			wantErr: "may not change metadata.name"},
		{name: "namespace is immutable", patch: []abi.PatchOperation{{Op: "replace", Path: "/metadata/namespace", Value: raw(`"other"`)}},
			wantErr: "may not change metadata.namespace"},
		{name: "unknown field", patch: []abi.PatchOperation{{Op: "add", Path: "/spec/bogus", Value: raw(`1`)}},
			wantErr: "does not decode"},
		{name: "failurePolicy Ignore skips a bad patch", patch: []abi.PatchOperation{{Op: "remove", Path: "/nothing"}}, ignore: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &wasmadmission.Plugin{PluginName: "p", Ignore: tt.ignore, Caller: &caller{mutate: abi.MutateResponse{Allowed: true, Patch: tt.patch}}}
			a := attrs()
			err := p.Admit(context.Background(), a)
			if tt.wantErr != "" {
				if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want 500 containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Object.(*corev1.Pod).Labels["x"]; got != tt.label {
				t.Fatalf("label x = %q, want %q", got, tt.label)
			}
		})
	}
}

func TestFailurePolicy(t *testing.T) {
	boom := errors.New("trap")
	if err := (&wasmadmission.Plugin{PluginName: "p", Caller: &caller{err: boom}}).Validate(context.Background(), attrs()); !apierrors.IsInternalError(err) {
		t.Fatalf("Fail: got %v, want 500", err)
	}
	if err := (&wasmadmission.Plugin{PluginName: "p", Ignore: true, Caller: &caller{err: boom}}).Validate(context.Background(), attrs()); err != nil {
		t.Fatalf("Ignore: got %v", err)
	}
}

// BenchmarkValidate measures one validating plugin as the API server calls it for a pod
// create (encoding the admission request, the guest call, decoding its answer), with the
// require-labels example in Rust and Go: the in-process share of a plugin's cost in
// tests/admission's BenchmarkPodCreateWasmValidate.
// requireLabels are the builds of the require-labels example the in-process tests load.
var requireLabels = []struct {
	lang  string
	build func(tb testing.TB) []byte
}{
	{"rust", func(tb testing.TB) []byte { return wasmtest.Rust(tb, "require-labels") }},
	{"go", func(tb testing.TB) []byte { return wasmtest.Go(tb, "examples/plugins/go/require-labels") }},
	{"assemblyscript", func(tb testing.TB) []byte { return wasmtest.AssemblyScript(tb, "require-labels") }},
	{"c", func(tb testing.TB) []byte { return wasmtest.C(tb, "require-labels") }},
}

// loadRequireLabels loads a build of require-labels n times, each requiring the label
// "team" and adapted to the chain as "ns/bench-<i>"; all is closed when tb ends.
func loadRequireLabels(tb testing.TB, build func(testing.TB) []byte, n int) []*wasmadmission.Plugin {
	tb.Helper()
	ctx := context.Background()
	r, err := wasm.NewRuntime(ctx, wasm.RuntimeConfig{CacheDir: wasmtest.CacheDir(tb), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(ctx) })
	mod := build(tb)
	cm, err := r.Compile(ctx, mod, wasm.Digest(mod))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cm.Close(ctx) })
	var ps []*wasmadmission.Plugin
	for i := range n {
		wp, err := r.Load(ctx, cm, wasm.PluginConfig{Name: fmt.Sprint("bench-", i), Config: json.RawMessage(`{"labels":["team"]}`), Limits: wasm.Limits{Instances: 1, MaxInstances: 2}})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = wp.Close(ctx) })
		ps = append(ps, &wasmadmission.Plugin{PluginName: fmt.Sprint("ns/bench-", i), Caller: wp})
	}
	return ps
}

// benchBuilds are the builds the in-process benchmarks compare: the require-labels
// example, and Gatekeeper's k8srequiredlabels compiled by OPA (its parameters are the same
// {"labels": [...]}; it checks labels only, so it is not in the example's own tests).
var benchBuilds = append(slices.Clone(requireLabels), struct {
	lang  string
	build func(tb testing.TB) []byte
}{"rego", func(tb testing.TB) []byte { return wasmtest.Rego(tb, "require-labels") }})

func BenchmarkValidate(b *testing.B) {
	for _, m := range benchBuilds {
		b.Run(m.lang, func(b *testing.B) {
			benchValidateWarmCold(b, loadRequireLabels(b, m.build, 1)[0])
		})
	}
}

// BenchmarkValidateShares splits a lone validating plugin's call into the host's share and
// the guest's, warm and cold: "host" is the adapter with a caller in Go (the request's
// encoding, no WebAssembly), "wat-allow" adds a WebAssembly call whose guest answers
// without reading the request (instance checkout, the copy into guest memory, the call, the
// answer), and the require-labels example in C, Rust, standard Go and AssemblyScript adds each guest's own
// work. Subtracting one case from the next gives each share.
func BenchmarkValidateShares(b *testing.B) {
	b.Run("host", func(b *testing.B) {
		benchValidateWarmCold(b, &wasmadmission.Plugin{PluginName: "ns/host", Caller: allowingCaller{form: wasm.CompactPods}})
	})
	b.Run("wat-allow", func(b *testing.B) {
		benchValidateWarmCold(b, loadRequireLabels(b, func(tb testing.TB) []byte { return wasmtest.WATSource(tb, allowWAT) }, 1)[0])
	})
	for _, m := range []struct {
		lang  string
		build func(tb testing.TB) []byte
	}{
		{"c", func(tb testing.TB) []byte { return wasmtest.C(tb, "require-labels") }},
		{"rust", func(tb testing.TB) []byte { return wasmtest.Rust(tb, "require-labels") }},
		{"go", func(tb testing.TB) []byte { return wasmtest.Go(tb, "examples/plugins/go/require-labels") }},
		{"assemblyscript", func(tb testing.TB) []byte { return wasmtest.AssemblyScript(tb, "require-labels") }},
	} {
		b.Run(m.lang, func(b *testing.B) { benchValidateWarmCold(b, loadRequireLabels(b, m.build, 1)[0]) })
	}
}

// allowWAT is a validating plugin that asks for compact pods, as require-labels does, and
// allows every request without reading it.
const allowWAT = `(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 4096))
  (func (export "wasmplane_abi_version") (result i32) (i32.const 1))
  (func (export "wasmplane_alloc") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (global.get $heap))
    (global.set $heap (i32.and (i32.add (i32.add (local.get $p) (local.get $n)) (i32.const 7)) (i32.const -8)))
    (local.get $p))
  (data (i32.const 64) "{\"compactPods\":true}")
  (func (export "configure") (param i32 i32) (result i64) (i64.const 274877906964))
  (data (i32.const 128) "{\"allowed\":true}")
  (func (export "validate") (param i32 i32) (result i64) (i64.const 549755813904))
)`

// allowingCaller allows every request after encoding it as *wasm.Plugin would for a module
// that asked for objects in form: the host's share without WebAssembly.
type allowingCaller struct{ form wasm.ObjectForm }

func (allowingCaller) Mutate(context.Context, *abi.AdmissionRequest) (*abi.MutateResponse, error) {
	return &abi.MutateResponse{Allowed: true}, nil
}

func (allowingCaller) Validate(context.Context, *abi.AdmissionRequest) (*abi.ValidateResponse, error) {
	return &abi.ValidateResponse{Allowed: true}, nil
}

func (allowingCaller) MutateJSON(context.Context, []byte) (*abi.MutateResponse, error) {
	return &abi.MutateResponse{Allowed: true}, nil
}

func (c allowingCaller) ValidateJSON(_ context.Context, build func(dst []byte, form wasm.RequestForm) ([]byte, error)) (*abi.ValidateResponse, error) {
	if _, err := build(nil, wasm.RequestForm{Objects: c.form}); err != nil {
		return nil, err
	}
	return &abi.ValidateResponse{Allowed: true}, nil
}

// benchValidateWarmCold times p's validate on a pod create as the server sends it, with
// the CPU caches warm and flushed before each call.
func benchValidateWarmCold(b *testing.B, p *wasmadmission.Plugin) {
	benchValidateWarmColdOn(b, p, serverPodAttrs())
}

// BenchmarkObjectForms times the host's encoding of a lone validating plugin's request
// (the adapter, with a caller in Go that only encodes) for each form a module may ask its
// objects in, on a pod create as the server sends it, a Deployment and a custom object,
// warm and with the caches flushed.
func BenchmarkObjectForms(b *testing.B) {
	deployment := attrs()
	deployment.Kind, deployment.Resource = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	pod := serverPodAttrs().Object.(*corev1.Pod)
	deployment.Object = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-1", Labels: map[string]string{"team": "a", "app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod.Spec}}}
	custom := attrs()
	custom.Kind, custom.Resource = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	custom.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "ns", "uid": "w-1", "labels": map[string]any{"team": "a"}},
		"spec":     map[string]any{"size": int64(3), "zones": []any{"a", "b", "c"}, "template": map[string]any{"image": "nginx:1.27", "ports": []any{int64(80), int64(443)}}}}}
	for _, obj := range []struct {
		name string
		a    *admission.Attributes
	}{{"pod", serverPodAttrs()}, {"deployment", deployment}, {"custom", custom}} {
		for _, form := range []wasm.ObjectForm{wasm.WholeObjects, wasm.CompactPods, wasm.ObjectMetadata} {
			if form == wasm.CompactPods && obj.name != "pod" {
				continue // whole objects
			}
			b.Run(obj.name+"/"+form.String(), func(b *testing.B) {
				benchValidateWarmColdOn(b, &wasmadmission.Plugin{PluginName: "ns/host", Caller: allowingCaller{form: form}}, obj.a)
			})
		}
	}
}

// benchValidateWarmColdOn is benchValidateWarmCold on a's request.
func benchValidateWarmColdOn(b *testing.B, p *wasmadmission.Plugin, a *admission.Attributes) {
	ctx := context.Background()
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "warm", true: "cold"}[cold], func(b *testing.B) {
			// cold: the caches are flushed before each call, as the ≈ 1 ms of HTTP,
			// etcd and encoding work around a create leaves them.
			var flush []byte
			if cold {
				flush = make([]byte, 64<<20)
			}
			var spent time.Duration
			calls := make([]time.Duration, 0, b.N)
			c0 := cpuTime(b)
			for range b.N {
				for i := 0; i < len(flush); i += 64 {
					flush[i]++
				}
				start := time.Now()
				if err := p.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				spent += d
				calls = append(calls, d)
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "call-ns/op")
			// The median call: on a shared machine the mean moves with every preemption.
			slices.Sort(calls)
			b.ReportMetric(float64(calls[len(calls)/2].Nanoseconds()), "p50-ns")
			if !cold {
				b.ReportMetric(float64(cpuTime(b)-c0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// serverPodAttrs is a pod create as the API server hands it to validating plugins: after
// defaulting and the built-in admission plugins (the ServiceAccount plugin's token volume
// and mount, DefaultTolerationSeconds' tolerations).
func serverPodAttrs() *admission.Attributes {
	a := attrs()
	pod := a.Object.(*corev1.Pod)
	pod.Labels = map[string]string{"team": "bench"}
	pod.UID, pod.CreationTimestamp = "0f6c1e34-9b5b-4c2e-8d7e-5d7f3e2a1b00", metav1.Now()
	pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy, pod.Spec.DNSPolicy = "default", corev1.RestartPolicyAlways, corev1.DNSClusterFirst
	pod.Spec.SchedulerName, pod.Spec.EnableServiceLinks = "default-scheduler", new(true)
	c := &pod.Spec.Containers[0]
	c.ImagePullPolicy, c.TerminationMessagePath, c.TerminationMessagePolicy = corev1.PullIfNotPresent, "/dev/termination-log", corev1.TerminationMessageReadFile
	c.VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	seconds := int64(300)
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds},
	}
	expiry, mode := int64(3607), int32(0o644)
	pod.Spec.Volumes = []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
	}}}}}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	return a
}

// cpuTime is the CPU time of the process so far: on a shared machine it tells more than
// the wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkValidateChain runs the validating phase of the admission chain with five
// plugins (the require-labels example loaded five times) on a pod create: what five
// plugins add to a create in-process, with the request encoded once for all of them.
func BenchmarkValidateChain(b *testing.B) {
	for _, m := range benchBuilds {
		b.Run(m.lang+"/plugins=5", func(b *testing.B) {
			ctx := context.Background()
			var vs []admission.Validator
			for _, p := range loadRequireLabels(b, m.build, 5) {
				vs = append(vs, p)
			}
			chain := &admission.Chain{Sources: []admission.Source{source{vs: vs}}}
			a := serverPodAttrs()
			b.ResetTimer()
			c0 := cpuTime(b)
			for range b.N {
				if err := chain.Validate(ctx, a); err != nil {
					b.Fatal(err)
				}
			}
			cpu := float64(cpuTime(b)-c0) / float64(b.N)
			b.ReportMetric(cpu, "cpu-ns/op")
			b.ReportMetric(cpu/5, "cpu-ns/plugin")
		})
	}
}

// TestObjectForms: a module that asked for compact pods gets the compact pod document of
// ABI §7.5 as a validate request's object and oldObject when they are Pods, one that asked
// for object metadata gets the object metadata document of §7.3 whatever the kind, and
// modules that did not ask get whole objects. The metadata document must hold what the
// whole object holds at every member it keeps.
func TestObjectForms(t *testing.T) {
	pod := serverPodAttrs().Object.(*corev1.Pod)
	compact, err := wasm.CompactPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	wantCompact, _ := json.Marshal(compact)
	update := func(a *admission.Attributes) *admission.Attributes {
		a.Operation, a.OldObject = admission.Update, a.Object.DeepCopyObject()
		return a
	}
	configMap := func() *admission.Attributes {
		a := attrs()
		a.Kind, a.Resource = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		a.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"a<b": "x&y", "team": "é\u2028"}, Annotations: map[string]string{"note": `"quoted"`}}, Data: map[string]string{"k": "v"}}
		return a
	}
	custom := func(meta map[string]any) func() *admission.Attributes {
		return func() *admission.Attributes {
			a := attrs()
			a.Kind, a.Resource = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
			obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "spec": map[string]any{"size": int64(3)}}
			if meta != nil {
				obj["metadata"] = meta
			}
			a.Object = &unstructured.Unstructured{Object: obj}
			return a
		}
	}
	tests := []struct {
		name       string
		form       wasm.ObjectForm
		attrs      func() *admission.Attributes
		wantObject []byte // nil: the whole object, or its metadata document for ObjectMetadata
	}{
		{name: "pod, compact asked", form: wasm.CompactPods, attrs: serverPodAttrs, wantObject: wantCompact},
		{name: "pod, whole", attrs: serverPodAttrs},
		{name: "update, both compact", form: wasm.CompactPods, attrs: func() *admission.Attributes { return update(serverPodAttrs()) }, wantObject: wantCompact},
		{name: "not a pod, compact asked", form: wasm.CompactPods, attrs: configMap},
		{name: "pod, metadata", form: wasm.ObjectMetadata, attrs: serverPodAttrs},
		{name: "pod with generateName and annotations, metadata", form: wasm.ObjectMetadata, attrs: func() *admission.Attributes {
			a := serverPodAttrs()
			p := a.Object.(*corev1.Pod)
			p.GenerateName, p.Annotations = "web-", map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"x":1}`}
			return a
		}},
		{name: "pod without labels, metadata", form: wasm.ObjectMetadata, attrs: func() *admission.Attributes {
			a := serverPodAttrs()
			a.Object.(*corev1.Pod).Labels = map[string]string{}
			return a
		}},
		{name: "pod with its type, metadata", form: wasm.ObjectMetadata, attrs: func() *admission.Attributes {
			a := serverPodAttrs()
			a.Object.(*corev1.Pod).TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			return a
		}},
		{name: "update, both metadata", form: wasm.ObjectMetadata, attrs: func() *admission.Attributes { return update(serverPodAttrs()) }},
		{name: "config map, escapes, metadata", form: wasm.ObjectMetadata, attrs: configMap},
		{name: "custom object, metadata", form: wasm.ObjectMetadata, attrs: custom(map[string]any{
			"name": "w", "namespace": "ns", "uid": "u-1", "labels": map[string]any{}, "annotations": map[string]any{"a": "b"},
			"creationTimestamp": "2026-12-07T00:00:00Z", "managedFields": []any{map[string]any{"manager": "kubectl"}},
		})},
		{name: "custom object without metadata, metadata", form: wasm.ObjectMetadata, attrs: custom(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.attrs()
			whole, err := json.Marshal(a.Object)
			if err != nil {
				t.Fatal(err)
			}
			c := &encodedCaller{caller: caller{validate: abi.ValidateResponse{Allowed: true}}, form: tt.form}
			if err := (&wasmadmission.Plugin{PluginName: "p", Caller: c}).Validate(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Object, OldObject json.RawMessage
			}
			if err := json.Unmarshal(c.raw[0], &got); err != nil {
				t.Fatal(err)
			}
			want := tt.wantObject
			if want == nil {
				// The whole object, with the apiVersion and kind a webhook sees, or what of
				// it the metadata document keeps; compared as values.
				var m map[string]any
				if err := json.Unmarshal(whole, &m); err != nil {
					t.Fatal(err)
				}
				if _, ok := m["kind"]; !ok {
					m["apiVersion"], m["kind"] = a.Kind.GroupVersion().String(), a.Kind.Kind
				}
				if tt.form == wasm.ObjectMetadata {
					for k := range m {
						if k != "apiVersion" && k != "kind" && k != "metadata" {
							delete(m, k)
						}
					}
					if meta, ok := m["metadata"].(map[string]any); ok {
						for k := range meta {
							if !slices.Contains([]string{"name", "generateName", "namespace", "uid", "labels", "annotations"}, k) {
								delete(meta, k)
							}
						}
					}
				}
				want, _ = json.Marshal(m)
				for _, raw := range []*json.RawMessage{&got.Object, &got.OldObject} {
					if len(*raw) == 0 || string(*raw) == "null" {
						continue
					}
					var g map[string]any
					if err := json.Unmarshal(*raw, &g); err != nil {
						t.Fatalf("%s: %v", *raw, err)
					}
					*raw, _ = json.Marshal(g)
				}
			}
			if string(got.Object) != string(want) {
				t.Fatalf("object\n got %s\nwant %s", got.Object, want)
			}
			if a.OldObject != nil && string(got.OldObject) != string(want) {
				t.Fatalf("oldObject\n got %s\nwant %s", got.OldObject, want)
			}
		})
	}
}

// TestRequireLabelsOnCompactPods runs the require-labels example, which asks for compact
// pods, on pod creates as the server sends them: its answers are those it gives on whole
// Pods.
func TestRequireLabelsOnCompactPods(t *testing.T) {
	for _, m := range requireLabels {
		t.Run(m.lang, func(t *testing.T) {
			ctx := context.Background()
			p := loadRequireLabels(t, m.build, 1)[0]
			if p.Caller.(*wasm.Plugin).ObjectForm() != wasm.CompactPods {
				t.Fatal("the example did not ask for compact pods")
			}
			tests := []struct {
				name   string
				change func(*corev1.Pod)
				denied string // part of the message; "" = allowed
			}{
				{name: "labelled, pinned image", change: func(*corev1.Pod) {}},
				{name: "no team label", change: func(p *corev1.Pod) { p.Labels = nil }, denied: `label "team" is required`},
				{name: "latest image", change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" }, denied: `image "nginx" must be pinned`},
				{name: "latest init image", change: func(p *corev1.Pod) {
					p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:latest"}}
				}, denied: `container "init"`},
				// Requests are written into the instance's input buffer in place; one that
				// outgrows it takes a larger buffer, and the smaller ones after it fit again.
				{name: "larger than the input buffer", change: func(p *corev1.Pod) {
					p.Annotations = map[string]string{"note": strings.Repeat("x", 64<<10)}
				}},
				{name: "larger than the input buffer, no team label", change: func(p *corev1.Pod) {
					p.Labels, p.Annotations = nil, map[string]string{"note": strings.Repeat("y", 200<<10)}
				}, denied: `label "team" is required`},
				{name: "labelled again, after a larger request", change: func(*corev1.Pod) {}},
				{name: "no team label, after a larger request", change: func(p *corev1.Pod) { p.Labels = nil }, denied: `label "team" is required`},
			}
			for _, tt := range tests {
				a := serverPodAttrs()
				tt.change(a.Object.(*corev1.Pod))
				err := p.Validate(ctx, a)
				switch {
				case tt.denied == "" && err != nil:
					t.Errorf("%s: %v", tt.name, err)
				case tt.denied != "" && (err == nil || !strings.Contains(err.Error(), tt.denied)):
					t.Errorf("%s: got %v, want a denial containing %q", tt.name, err, tt.denied)
				}
			}
		})
	}
}

// TestObjectMetadataReachesGuest: a C plugin that asks for object metadata documents
// receives, in the server's validate requests about a Pod, a Deployment and a custom
// object, exactly the document AppendObjectMetadata writes (it echoes its object back as
// the denial's message).
func TestObjectMetadataReachesGuest(t *testing.T) {
	p := loadRequireLabels(t, func(tb testing.TB) []byte {
		return wasmtest.CFile(tb, "plugins/wasm/admission/testdata/echo-metadata.c")
	}, 1)[0]
	if got := p.Caller.(*wasm.Plugin).ObjectForm(); got != wasm.ObjectMetadata {
		t.Fatalf("ObjectForm() = %v, want objectMetadata", got)
	}
	deployment := func() *admission.Attributes {
		a := attrs()
		a.Kind, a.Resource = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		a.Object = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "d-1", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"owner": "alice"}},
			Spec: appsv1.DeploymentSpec{Replicas: new(int32(3))}}
		return a
	}
	widget := func() *admission.Attributes {
		a := attrs()
		a.Kind, a.Resource = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		a.Object = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "labels": map[string]any{}, "generation": int64(1)}, "spec": map[string]any{"size": int64(3)}}}
		return a
	}
	for _, tc := range []struct {
		name  string
		attrs func() *admission.Attributes
		want  string
	}{
		{"pod", serverPodAttrs, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"ns","uid":"0f6c1e34-9b5b-4c2e-8d7e-5d7f3e2a1b00","labels":{"team":"bench"}}}`},
		{"deployment", deployment, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","uid":"d-1","labels":{"team":"a"},"annotations":{"owner":"alice"}}}`},
		{"custom object", widget, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(context.Background(), tc.attrs())
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("Validate: %v, want the plugin's denial", err)
			}
			if msg := status.Status().Message; !strings.HasSuffix(msg, tc.want) {
				t.Fatalf("the guest received\n%s\nwant\n%s", msg, tc.want)
			}
		})
	}
}
