package openapi

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// param is a path or query parameter, flavour-neutral.
type param struct {
	name, in, typ, desc string
	required            bool
}

// response is one status code of an operation. A nil typ with text set is a plain-text
// body (pods/log); a nil typ without text has no body.
type response struct {
	code int
	typ  reflect.Type
	text bool
}

// operation is one HTTP method on a route, rendered later into v2 and v3.
type operation struct {
	method, id, desc, action string
	gvk                      schema.GroupVersionKind
	params                   []param
	body                     reflect.Type
	bodyRequired             bool
	patch                    bool
	watch                    bool
	text                     bool
	responses                []response
}

// route is one URL template with its operations.
type route struct {
	path   string
	gvPath string // "api/v1" or "apis/<group>/<version>": the v3 document it belongs to
	tag    string
	params []param
	ops    []operation
}

// Standard verbs of a resource, in the vocabulary of discovery documents.
const (
	verbGet              = "get"
	verbList             = "list"
	verbWatch            = "watch"
	verbCreate           = "create"
	verbUpdate           = "update"
	verbPatch            = "patch"
	verbDelete           = "delete"
	verbDeleteCollection = "deletecollection"
)

// Media types advertised by operations; functions rather than variables so that no
// caller can alter a shared slice.
func mediaTypes() []string {
	return []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
}

func watchMediaTypes() []string {
	return []string{"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"}
}

func patchMediaTypes() []string {
	return []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
}

func textMediaTypes() []string {
	return []string{"text/plain", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
}

// optionParams turns an options struct into query parameters by reflection, which is also
// how kube-apiserver derives them, so names and descriptions follow the API types.
func optionParams(t reflect.Type, skip ...string) []param {
	docs := swaggerDoc(t)
	var out []param
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" || slices.Contains(skip, name) {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		p := param{name: name, in: "query", desc: docs[name]}
		switch {
		case ft == reflect.TypeFor[metav1.Time]():
			p.typ = "string"
		case ft.Kind() == reflect.Bool:
			p.typ = "boolean"
		case ft.Kind() == reflect.Int64 || ft.Kind() == reflect.Int32 || ft.Kind() == reflect.Int:
			p.typ = "integer"
		case ft.Kind() == reflect.String, ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			// Repeated query values (dryRun=All) are described as one string, like Kubernetes does.
			p.typ = "string"
		default:
			// Structured options (preconditions) only travel in the request body.
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b param) int { return strings.Compare(a.name, b.name) })
	return out
}

// mergeParams returns the union of parameter lists sorted by name, first one winning.
func mergeParams(lists ...[]param) []param {
	var out []param
	for _, l := range lists {
		for _, p := range l {
			if !slices.ContainsFunc(out, func(q param) bool { return q.name == p.name }) {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b param) int { return strings.Compare(a.name, b.name) })
	return out
}

// paramSets precomputes the query parameters of each verb once per build.
type paramSets struct {
	list, create, update, patch, del, deleteCollection, log []param
}

func newParamSets() paramSets {
	list := optionParams(reflect.TypeFor[metav1.ListOptions]())
	return paramSets{
		list:             list,
		create:           optionParams(reflect.TypeFor[metav1.CreateOptions]()),
		update:           optionParams(reflect.TypeFor[metav1.UpdateOptions]()),
		patch:            optionParams(reflect.TypeFor[metav1.PatchOptions]()),
		del:              optionParams(reflect.TypeFor[metav1.DeleteOptions]()),
		deleteCollection: mergeParams(optionParams(reflect.TypeFor[metav1.DeleteOptions]()), optionParams(reflect.TypeFor[metav1.ListOptions](), "watch", "allowWatchBookmarks")),
		log:              optionParams(reflect.TypeFor[corev1.PodLogOptions]()),
	}
}

func prettyParam() param {
	return param{name: "pretty", in: "query", typ: "string",
		desc: "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."}
}

func namespaceParam() param {
	return param{name: "namespace", in: "path", typ: "string", required: true,
		desc: "object name and auth scope, such as for teams and projects"}
}

func nameParam(kind string) param {
	return param{name: "name", in: "path", typ: "string", required: true, desc: "name of the " + kind}
}

// camel turns an API group into the CamelCase segment of Kubernetes operation IDs
// ("" → Core, "coordination.k8s.io" → Coordination, "rbac.authorization.k8s.io" → RbacAuthorization).
func camel(s string) string {
	var b strings.Builder
	for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func groupID(gv schema.GroupVersion) string {
	g := strings.TrimSuffix(gv.Group, ".k8s.io")
	if g == "" {
		g = "core"
	}
	return camel(g) + camel(gv.Version)
}

func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func gvTag(gv schema.GroupVersion) string {
	g := strings.TrimSuffix(gv.Group, ".k8s.io")
	if g == "" {
		g = "core"
	}
	return strings.NewReplacer(".", "", "-", "").Replace(g) + "_" + gv.Version
}

// hasVerb treats an empty verb list as "every standard verb" so callers only list
// verbs when they restrict them.
func hasVerb(verbs []string, v string) bool {
	return len(verbs) == 0 || slices.Contains(verbs, v)
}

// subresourceMethods normalizes a subresource's verbs (discovery verbs or HTTP methods)
// into HTTP methods, defaulting by subresource name.
func subresourceMethods(sub Subresource) []string {
	verbs := sub.Verbs
	if len(verbs) == 0 {
		switch sub.Name {
		case "status", "scale":
			verbs = []string{verbGet, verbUpdate, verbPatch}
		case "binding", "eviction":
			verbs = []string{verbCreate}
		default:
			verbs = []string{verbGet}
		}
	}
	methods := map[string]bool{}
	for _, v := range verbs {
		switch strings.ToLower(v) {
		case verbGet:
			methods[http.MethodGet] = true
		case verbCreate, "post":
			methods[http.MethodPost] = true
		case verbUpdate, "put":
			methods[http.MethodPut] = true
		case verbPatch:
			methods[http.MethodPatch] = true
		case verbDelete:
			methods[http.MethodDelete] = true
		case "connect":
			methods[http.MethodGet] = true
			methods[http.MethodPost] = true
		}
	}
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if methods[m] {
			out = append(out, m)
		}
	}
	return out
}

// typeOf resolves a kind to its Go type through the scheme.
func typeOf(s *runtime.Scheme, gvk schema.GroupVersionKind) (reflect.Type, error) {
	obj, err := s.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", gvk, err)
	}
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, nil
}

// buildRoutes lays out the URL space of the resources the way kube-apiserver does.
func buildRoutes(s *runtime.Scheme, resources []Resource) ([]route, error) {
	ps := newParamSets()
	var routes []route
	for _, r := range resources {
		gv := r.GVK.GroupVersion()
		kindType, err := typeOf(s, r.GVK)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Plural, err)
		}
		listKind := r.ListKind
		if listKind == "" {
			listKind = r.GVK.Kind + "List"
		}
		listType, err := typeOf(s, gv.WithKind(listKind))
		// Create-only resources (access reviews) have no list kind.
		if err != nil && hasVerb(r.Verbs, verbList) {
			return nil, fmt.Errorf("resource %s: %w", r.Plural, err)
		}
		prefix := "/" + gvPath(gv)
		scoped := prefix
		scope := ""
		common := []param{prettyParam()}
		if r.Namespaced {
			scoped += "/namespaces/{namespace}"
			scope = "Namespaced"
			common = []param{namespaceParam(), prettyParam()}
		}
		id := groupID(gv)
		kind := r.GVK.Kind
		tag := gvTag(gv)
		add := func(path string, params []param, ops []operation) {
			if len(ops) > 0 {
				routes = append(routes, route{path: path, gvPath: gvPath(gv), tag: tag, params: params, ops: ops})
			}
		}

		var coll []operation
		if hasVerb(r.Verbs, verbList) {
			coll = append(coll, operation{method: http.MethodGet, id: "list" + id + scope + kind,
				desc: "list or watch objects of kind " + kind, action: "list", gvk: r.GVK,
				params: ps.list, watch: hasVerb(r.Verbs, verbWatch), responses: []response{{code: 200, typ: listType}}})
		}
		if hasVerb(r.Verbs, verbCreate) {
			coll = append(coll, operation{method: http.MethodPost, id: "create" + id + scope + kind,
				desc: "create " + article(kind), action: "post", gvk: r.GVK,
				params: ps.create, body: kindType, bodyRequired: true,
				responses: []response{{code: 200, typ: kindType}, {code: 201, typ: kindType}, {code: 202, typ: kindType}}})
		}
		if hasVerb(r.Verbs, verbDeleteCollection) {
			coll = append(coll, operation{method: http.MethodDelete, id: "delete" + id + "Collection" + scope + kind,
				desc: "delete collection of " + kind, action: "deletecollection", gvk: r.GVK,
				params: ps.deleteCollection, body: reflect.TypeFor[metav1.DeleteOptions](),
				responses: []response{{code: 200, typ: reflect.TypeFor[metav1.Status]()}}})
		}
		add(scoped+"/"+r.Plural, common, coll)

		if r.Namespaced && hasVerb(r.Verbs, verbList) {
			add(prefix+"/"+r.Plural, []param{prettyParam()}, []operation{{method: http.MethodGet,
				id: "list" + id + kind + "ForAllNamespaces", desc: "list or watch objects of kind " + kind,
				action: "list", gvk: r.GVK, params: ps.list, watch: hasVerb(r.Verbs, verbWatch),
				responses: []response{{code: 200, typ: listType}}}})
		}

		var item []operation
		if hasVerb(r.Verbs, verbGet) {
			item = append(item, operation{method: http.MethodGet, id: "read" + id + scope + kind,
				desc: "read the specified " + kind, action: "get", gvk: r.GVK,
				responses: []response{{code: 200, typ: kindType}}})
		}
		if hasVerb(r.Verbs, verbUpdate) {
			item = append(item, operation{method: http.MethodPut, id: "replace" + id + scope + kind,
				desc: "replace the specified " + kind, action: "put", gvk: r.GVK,
				params: ps.update, body: kindType, bodyRequired: true,
				responses: []response{{code: 200, typ: kindType}, {code: 201, typ: kindType}}})
		}
		if hasVerb(r.Verbs, verbPatch) {
			item = append(item, operation{method: http.MethodPatch, id: "patch" + id + scope + kind,
				desc: "partially update the specified " + kind, action: "patch", gvk: r.GVK,
				params: ps.patch, body: reflect.TypeFor[metav1.Patch](), bodyRequired: true, patch: true,
				responses: []response{{code: 200, typ: kindType}, {code: 201, typ: kindType}}})
		}
		if hasVerb(r.Verbs, verbDelete) {
			item = append(item, operation{method: http.MethodDelete, id: "delete" + id + scope + kind,
				desc: "delete " + article(kind), action: "delete", gvk: r.GVK,
				params: ps.del, body: reflect.TypeFor[metav1.DeleteOptions](),
				responses: []response{{code: 200, typ: reflect.TypeFor[metav1.Status]()}, {code: 202, typ: reflect.TypeFor[metav1.Status]()}}})
		}
		itemParams := append([]param{nameParam(kind)}, common...)
		add(scoped+"/"+r.Plural+"/{name}", itemParams, item)

		for _, sub := range r.Subresources {
			subRoute, err := subresourceRoute(s, ps, r, sub, kindType)
			if err != nil {
				return nil, err
			}
			if len(subRoute.ops) == 0 {
				continue
			}
			subRoute.path = scoped + "/" + r.Plural + "/{name}/" + sub.Name
			subRoute.gvPath, subRoute.tag = gvPath(gv), tag
			if sub.Name == "binding" || sub.Name == "eviction" {
				subRoute.params = append([]param{nameParam(subRoute.ops[0].gvk.Kind)}, common...)
			} else {
				subRoute.params = itemParams
			}
			routes = append(routes, subRoute)
		}
	}
	slices.SortStableFunc(routes, func(a, b route) int { return strings.Compare(a.path, b.path) })
	for i := 1; i < len(routes); i++ {
		if routes[i].path == routes[i-1].path {
			return nil, fmt.Errorf("path %s is served by two resources", routes[i].path)
		}
	}
	return routes, nil
}

// subresourceRoute builds the operations of one subresource (path and params are set by the caller).
func subresourceRoute(s *runtime.Scheme, ps paramSets, r Resource, sub Subresource, parent reflect.Type) (route, error) {
	gvk, typ := r.GVK, parent
	if !sub.Kind.Empty() {
		t, err := typeOf(s, sub.Kind)
		if err != nil {
			return route{}, fmt.Errorf("subresource %s/%s: %w", r.Plural, sub.Name, err)
		}
		gvk, typ = sub.Kind, t
	}
	id := groupID(r.GVK.GroupVersion())
	scope := ""
	if r.Namespaced {
		scope = "Namespaced"
	}
	kind, subCamel := r.GVK.Kind, camel(sub.Name)
	connect := sub.Name == "exec" || sub.Name == "attach" || sub.Name == "portforward" || sub.Name == "proxy"
	var ops []operation
	for _, m := range subresourceMethods(sub) {
		op := operation{method: m, gvk: gvk}
		switch {
		case connect:
			op.id = "connect" + camel(strings.ToLower(m)) + id + scope + kind + subCamel
			op.desc = "connect " + m + " requests to " + sub.Name + " of " + kind
			op.action, op.text = "connect", true
			op.responses = []response{{code: 200, text: true}}
		case sub.Name == "log" && m == http.MethodGet:
			// The log is plain text, but the operation still belongs to the Pod kind.
			op.id = "read" + id + scope + kind + subCamel
			op.desc = "read log of the specified " + kind
			op.action, op.text, op.params = "get", true, ps.log
			op.responses = []response{{code: 200, text: true}}
		case m == http.MethodGet:
			op.id = "read" + id + scope + kind + subCamel
			op.desc = "read " + sub.Name + " of the specified " + kind
			op.action = "get"
			op.responses = []response{{code: 200, typ: typ}}
		case m == http.MethodPut:
			op.id = "replace" + id + scope + kind + subCamel
			op.desc = "replace " + sub.Name + " of the specified " + kind
			op.action, op.params, op.body, op.bodyRequired = "put", ps.update, typ, true
			op.responses = []response{{code: 200, typ: typ}, {code: 201, typ: typ}}
		case m == http.MethodPatch:
			op.id = "patch" + id + scope + kind + subCamel
			op.desc = "partially update " + sub.Name + " of the specified " + kind
			op.action, op.params, op.body, op.bodyRequired, op.patch = "patch", ps.patch, reflect.TypeFor[metav1.Patch](), true, true
			op.responses = []response{{code: 200, typ: typ}, {code: 201, typ: typ}}
		case m == http.MethodPost:
			op.id = "create" + id + scope + kind + subCamel
			op.desc = "create " + sub.Name + " of " + article(kind)
			op.action, op.params, op.body, op.bodyRequired = "post", ps.create, typ, true
			op.responses = []response{{code: 200, typ: typ}, {code: 201, typ: typ}, {code: 202, typ: typ}}
		case m == http.MethodDelete:
			op.id = "delete" + id + scope + kind + subCamel
			op.desc = "delete " + sub.Name + " of " + article(kind)
			op.action, op.params, op.body = "delete", ps.del, reflect.TypeFor[metav1.DeleteOptions]()
			op.responses = []response{{code: 200, typ: reflect.TypeFor[metav1.Status]()}, {code: 202, typ: reflect.TypeFor[metav1.Status]()}}
		}
		ops = append(ops, op)
	}
	return route{ops: ops}, nil
}

// article prefixes a kind with "a" or "an" for operation descriptions.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
