package openapi

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	docTitle          = "Kubernetes"
	securitySchemeKey = "BearerToken"
)

// methodKeys returns the HTTP methods of a path item in the sorted order of their JSON keys.
func methodKeys() []struct{ method, key string } {
	return []struct{ method, key string }{
		{http.MethodDelete, "delete"},
		{http.MethodGet, "get"},
		{http.MethodPatch, "patch"},
		{http.MethodPost, "post"},
		{http.MethodPut, "put"},
	}
}

func statusText(code int) string {
	if code == http.StatusOK {
		return "OK"
	}
	return http.StatusText(code)
}

// consumes lists what an operation accepts; kube-apiserver advertises */* for bodies
// because the codecs decide, and the patch types explicitly.
func (op operation) consumes() []string {
	switch {
	case op.patch:
		return patchMediaTypes()
	case op.body != nil || op.text:
		return []string{"*/*"}
	}
	return nil
}

func (op operation) produces() []string {
	switch {
	case op.text:
		return textMediaTypes()
	case op.watch:
		return slices.Concat(mediaTypes(), watchMediaTypes())
	}
	return mediaTypes()
}

// allResponses returns the operation's responses plus 401, which every operation may return.
func (op operation) allResponses() []response {
	out := append(slices.Clone(op.responses), response{code: http.StatusUnauthorized})
	slices.SortFunc(out, func(a, b response) int { return a.code - b.code })
	return out
}

func writeGVK(w *jsonWriter, op operation) {
	w.key(extGVK)
	w.raw(`{"group":`)
	w.str(op.gvk.Group)
	w.raw(`,"kind":`)
	w.str(op.gvk.Kind)
	w.raw(`,"version":`)
	w.str(op.gvk.Version)
	w.raw("}")
}

func writeSecurity(w *jsonWriter) {
	w.raw(`[{"` + securitySchemeKey + `":[]}]`)
}

func writeSecurityScheme(w *jsonWriter) {
	w.raw(`{"` + securitySchemeKey + `":{"description":"Bearer Token authentication","in":"header","name":"authorization","type":"apiKey"}}`)
}

func writeInfo(w *jsonWriter, version string) {
	w.raw(`{"title":`)
	w.str(docTitle)
	w.raw(`,"version":`)
	w.str(version)
	w.raw("}")
}

// v2Doc renders the Swagger 2.0 document over every route.
type v2Doc struct {
	b *schemaBuilder
	// shared hoists query and namespace parameters into the top-level `parameters`
	// section, as kube-apiserver does: their descriptions repeated on every operation
	// would double the document. Path parameters named "name" stay inline because their
	// description names the kind.
	shared map[string]param
}

func (d *v2Doc) paramRef(w *jsonWriter, p param) {
	if p.in == "path" && p.name == "name" {
		writeV2Param(w, p)
		return
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%v", p.in, p.typ, p.desc, p.required)
	key := fmt.Sprintf("%s-%08x", p.name, h.Sum32())
	d.shared[key] = p
	w.raw(`{"$ref":`)
	w.str("#/parameters/" + key)
	w.raw("}")
}

func writeV2Param(w *jsonWriter, p param) {
	w.raw("{")
	if p.desc != "" {
		w.key("description")
		w.str(p.desc)
	}
	w.key("in")
	w.str(p.in)
	w.key("name")
	w.str(p.name)
	if p.required {
		w.raw(`,"required":true`)
	}
	w.key("type")
	w.str(p.typ)
	w.raw(`,"uniqueItems":true}`)
}

func (d *v2Doc) ref(w *jsonWriter, name string) {
	w.raw(`{"$ref":`)
	w.str(d.b.refPrefix + name)
	w.raw("}")
}

func (d *v2Doc) operation(w *jsonWriter, op operation, tag string) {
	w.raw("{")
	if c := op.consumes(); len(c) > 0 {
		w.key("consumes")
		w.strings(c)
	}
	w.key("description")
	w.str(op.desc)
	w.key("operationId")
	w.str(op.id)
	if op.body != nil || len(op.params) > 0 {
		w.key("parameters")
		w.raw("[")
		if op.body != nil {
			w.raw(`{"in":"body","name":"body"`)
			if op.bodyRequired {
				w.raw(`,"required":true`)
			}
			w.raw(`,"schema":`)
			d.ref(w, d.b.refName(op.body))
			w.raw("}")
		}
		for _, p := range op.params {
			w.sep()
			d.paramRef(w, p)
		}
		w.raw("]")
	}
	w.key("produces")
	w.strings(op.produces())
	w.key("responses")
	w.raw("{")
	for _, r := range op.allResponses() {
		w.key(strconv.Itoa(r.code))
		w.raw(`{"description":`)
		w.str(statusText(r.code))
		switch {
		case r.typ != nil:
			w.raw(`,"schema":`)
			d.ref(w, d.b.refName(r.typ))
		case r.text:
			w.raw(`,"schema":{"type":"string"}`)
		}
		w.raw("}")
	}
	w.raw("}")
	w.raw(`,"schemes":["https"]`)
	w.key("tags")
	w.strings([]string{tag})
	w.key(extAction)
	w.str(op.action)
	writeGVK(w, op)
	w.raw("}")
}

// v2Rendered is the Swagger 2.0 document with what SetExtraV2 needs to add to it without
// parsing it again: where its definitions, parameters and paths objects close, and
// which keys each already has.
type v2Rendered struct {
	data []byte
	// ends are the offsets of the closing braces of definitions, parameters and paths.
	ends [3]int
	// keys are the names each of the three sections holds.
	keys [3]map[string]bool
}

func (d *v2Doc) render(routes []route, version string) (v2Rendered, error) {
	roots := map[string]bool{}
	d.b.curDeps = roots
	paths := jsonWriter{}
	paths.raw("{")
	for _, r := range routes {
		paths.key(r.path)
		paths.raw("{")
		for _, m := range methodKeys() {
			for _, op := range r.ops {
				if op.method == m.method {
					paths.key(m.key)
					d.operation(&paths, op, r.tag)
				}
			}
			if m.key == "get" && len(r.params) > 0 {
				// "parameters" sorts between "get" and "patch".
				paths.key("parameters")
				paths.raw("[")
				for _, p := range r.params {
					paths.sep()
					d.paramRef(&paths, p)
				}
				paths.raw("]")
			}
		}
		paths.raw("}")
	}
	paths.raw("}")
	d.b.curDeps = nil

	out := v2Rendered{keys: [3]map[string]bool{{}, {}, {}}}
	w := jsonWriter{b: make([]byte, 0, len(paths.b)*2)}
	w.raw("{")
	w.key("definitions")
	defs := definitionsJSON{b: d.b, cache: map[string][]byte{}}
	defNames := slices.Sorted(maps.Keys(d.b.closure(slices.Sorted(maps.Keys(roots)))))
	defs.write(&w, defNames)
	out.ends[0] = len(w.b) - 1
	w.key("info")
	writeInfo(&w, version)
	w.key("parameters")
	w.raw("{")
	for _, k := range slices.Sorted(maps.Keys(d.shared)) {
		w.key(k)
		writeV2Param(&w, d.shared[k])
		out.keys[1][k] = true
	}
	w.raw("}")
	out.ends[1] = len(w.b) - 1
	w.key("paths")
	w.b = append(w.b, paths.b...)
	out.ends[2] = len(w.b) - 1
	w.key("security")
	writeSecurity(&w)
	w.key("securityDefinitions")
	writeSecurityScheme(&w)
	w.raw(`,"swagger":"2.0"}`)
	if w.err != nil {
		return out, w.err
	}
	if paths.err != nil {
		return out, paths.err
	}
	for _, n := range defNames {
		out.keys[0][n] = true
	}
	for _, r := range routes {
		out.keys[2][r.path] = true
	}
	out.data = w.b
	return out, nil
}

// buildV2 renders the Swagger 2.0 document.
func buildV2(routes []route, b *schemaBuilder, version string) (v2Rendered, error) {
	d := &v2Doc{b: b, shared: map[string]param{}}
	return d.render(routes, version)
}

// withExtra returns the document with the definitions, parameters and paths of extra
// added, each after the section's own entries; a name the document already has keeps its
// entry, as kube-apiserver's merge lets the built-in document win.
func (r v2Rendered) withExtra(extra []*spec.Swagger) ([]byte, error) {
	var add [3]map[string]any
	for i := range add {
		add[i] = map[string]any{}
	}
	for _, sw := range extra {
		for k, v := range sw.Definitions {
			add[0][k] = v
		}
		for k, v := range sw.Parameters {
			add[1][k] = v
		}
		if sw.Paths != nil {
			for k, v := range sw.Paths.Paths {
				add[2][k] = v
			}
		}
	}
	out := make([]byte, 0, len(r.data)+len(extra)*16<<10)
	from := 0
	for i, end := range r.ends {
		out = append(out, r.data[from:end]...)
		for _, k := range slices.Sorted(maps.Keys(add[i])) {
			if r.keys[i][k] {
				continue
			}
			if out[len(out)-1] != '{' {
				out = append(out, ',')
			}
			v, err := json.Marshal(add[i][k])
			if err != nil {
				return nil, fmt.Errorf("encoding %s: %w", k, err)
			}
			kb, err := json.Marshal(k)
			if err != nil {
				return nil, fmt.Errorf("encoding %s: %w", k, err)
			}
			out = append(out, kb...)
			out = append(out, ':')
			out = append(out, v...)
		}
		from = end
	}
	return append(out, r.data[from:]...), nil
}

// v3Renderer renders the per-group-version OpenAPI 3.0 documents; parameters are inlined
// because kubectl's field-validation probe only recognizes inline v3 parameters.
type v3Renderer struct {
	b    *schemaBuilder
	defs definitionsJSON
}

func writeV3Param(w *jsonWriter, p param) {
	w.raw("{")
	if p.desc != "" {
		w.key("description")
		w.str(p.desc)
	}
	w.key("in")
	w.str(p.in)
	w.key("name")
	w.str(p.name)
	if p.required {
		w.raw(`,"required":true`)
	}
	w.raw(`,"schema":{"type":`)
	w.str(p.typ)
	w.raw(`,"uniqueItems":true}}`)
}

// content writes a media-type map whose entries all carry the same schema.
func (v *v3Renderer) content(w *jsonWriter, types []string, schema func()) {
	w.raw("{")
	for _, t := range slices.Sorted(slices.Values(types)) {
		w.key(t)
		w.raw(`{"schema":`)
		schema()
		w.raw("}")
	}
	w.raw("}")
}

func (v *v3Renderer) ref(w *jsonWriter, name string) func() {
	return func() {
		w.raw(`{"$ref":`)
		w.str(v.b.refPrefix + name)
		w.raw("}")
	}
}

func (v *v3Renderer) operation(w *jsonWriter, op operation, tag string) {
	w.raw("{")
	w.key("description")
	w.str(op.desc)
	w.key("operationId")
	w.str(op.id)
	if len(op.params) > 0 {
		w.key("parameters")
		w.raw("[")
		for _, p := range op.params {
			w.sep()
			writeV3Param(w, p)
		}
		w.raw("]")
	}
	if op.body != nil {
		w.key("requestBody")
		w.raw(`{"content":`)
		v.content(w, op.consumes(), v.ref(w, v.b.refName(op.body)))
		if op.bodyRequired {
			w.raw(`,"required":true`)
		}
		w.raw("}")
	}
	w.key("responses")
	w.raw("{")
	for _, r := range op.allResponses() {
		w.key(strconv.Itoa(r.code))
		w.raw("{")
		switch {
		case r.typ != nil:
			w.key("content")
			v.content(w, op.produces(), v.ref(w, v.b.refName(r.typ)))
		case r.text:
			w.key("content")
			v.content(w, op.produces(), func() { w.raw(`{"type":"string"}`) })
		}
		w.key("description")
		w.str(statusText(r.code))
		w.raw("}")
	}
	w.raw("}")
	w.key("tags")
	w.strings([]string{tag})
	w.key(extAction)
	w.str(op.action)
	writeGVK(w, op)
	w.raw("}")
}

func (v *v3Renderer) render(routes []route, version string) ([]byte, error) {
	roots := map[string]bool{}
	v.b.curDeps = roots
	paths := jsonWriter{}
	paths.raw("{")
	for _, r := range routes {
		paths.key(r.path)
		paths.raw("{")
		for _, m := range methodKeys() {
			for _, op := range r.ops {
				if op.method == m.method {
					paths.key(m.key)
					v.operation(&paths, op, r.tag)
				}
			}
			if m.key == "get" && len(r.params) > 0 {
				paths.key("parameters")
				paths.raw("[")
				for _, p := range r.params {
					paths.sep()
					writeV3Param(&paths, p)
				}
				paths.raw("]")
			}
		}
		paths.raw("}")
	}
	paths.raw("}")
	v.b.curDeps = nil

	w := jsonWriter{b: make([]byte, 0, len(paths.b)*2)}
	w.raw(`{"components":{"schemas":`)
	v.defs.write(&w, slices.Sorted(maps.Keys(v.b.closure(slices.Sorted(maps.Keys(roots))))))
	w.key("securitySchemes")
	writeSecurityScheme(&w)
	w.raw("}")
	w.key("info")
	writeInfo(&w, version)
	w.raw(`,"openapi":"3.0.0"`)
	w.key("paths")
	w.b = append(w.b, paths.b...)
	w.key("security")
	writeSecurity(&w)
	w.raw("}")
	if w.err != nil {
		return nil, w.err
	}
	if paths.err != nil {
		return nil, paths.err
	}
	return w.b, nil
}

// buildV3 renders one OpenAPI 3.0 document per group version, each self-contained.
func buildV3(routes []route, b *schemaBuilder, version string) (map[string][]byte, error) {
	byGV := map[string][]route{}
	for _, r := range routes {
		byGV[r.gvPath] = append(byGV[r.gvPath], r)
	}
	v := &v3Renderer{b: b, defs: definitionsJSON{b: b, cache: map[string][]byte{}}}
	out := make(map[string][]byte, len(byGV))
	for _, gv := range slices.Sorted(maps.Keys(byGV)) {
		data, err := v.render(byGV[gv], version)
		if err != nil {
			return nil, fmt.Errorf("v3 %s: %w", gv, err)
		}
		out[gv] = data
	}
	return out, nil
}
