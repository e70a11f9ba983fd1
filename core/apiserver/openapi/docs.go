package openapi

import (
	"maps"
	"net/http"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	docTitle          = "Kubernetes"
	securitySchemeKey = "BearerToken"
)

func gvkExtension(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
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
		return patchMediaTypes
	case op.body != nil || op.text:
		return []string{"*/*"}
	}
	return nil
}

func (op operation) produces() []string {
	switch {
	case op.text:
		return textMediaTypes
	case op.watch:
		return slices.Concat(mediaTypes, watchMediaTypes)
	}
	return mediaTypes
}

// buildV2 renders the Swagger 2.0 document over every route.
func buildV2(routes []route, b *schemaBuilder, version string) *spec.Swagger {
	roots := map[string]bool{}
	b.curDeps = roots
	paths := make(map[string]spec.PathItem, len(routes))
	for _, r := range routes {
		item := spec.PathItem{}
		for _, p := range r.params {
			item.Parameters = append(item.Parameters, v2Param(p))
		}
		for _, op := range r.ops {
			o := v2Operation(op, r.tag, b)
			switch op.method {
			case http.MethodGet:
				item.Get = o
			case http.MethodPut:
				item.Put = o
			case http.MethodPost:
				item.Post = o
			case http.MethodPatch:
				item.Patch = o
			case http.MethodDelete:
				item.Delete = o
			}
		}
		paths[r.path] = item
	}
	b.curDeps = nil
	defs := spec.Definitions{}
	for name, s := range b.closure(slices.Sorted(maps.Keys(roots))) {
		defs[name] = *s
	}
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: docTitle, Version: version}},
		Paths:       &spec.Paths{Paths: paths},
		Definitions: defs,
		SecurityDefinitions: spec.SecurityDefinitions{securitySchemeKey: &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		Security: []map[string][]string{{securitySchemeKey: {}}},
	}}
}

func v2Param(p param) spec.Parameter {
	out := spec.Parameter{ParamProps: spec.ParamProps{Name: p.name, In: p.in, Description: p.desc, Required: p.required}}
	out.Type = p.typ
	out.UniqueItems = true
	return out
}

func v2Operation(op operation, tag string, b *schemaBuilder) *spec.Operation {
	o := &spec.Operation{OperationProps: spec.OperationProps{
		Description: op.desc,
		ID:          op.id,
		Tags:        []string{tag},
		Schemes:     []string{"https"},
		Consumes:    op.consumes(),
		Produces:    op.produces(),
	}}
	if op.body != nil {
		o.Parameters = append(o.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
			Name: "body", In: "body", Required: op.bodyRequired,
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(op.body)}},
		}})
	}
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, v2Param(p))
	}
	resp := map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: statusText(http.StatusUnauthorized)}}}
	for _, r := range op.responses {
		sr := spec.Response{ResponseProps: spec.ResponseProps{Description: statusText(r.code)}}
		switch {
		case r.typ != nil:
			sr.Schema = &spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(r.typ)}}
		case r.text:
			sr.Schema = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
		}
		resp[r.code] = sr
	}
	o.Responses = &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: resp}}
	o.AddExtension(extAction, op.action)
	o.AddExtension(extGVK, gvkExtension(op.gvk))
	return o
}

// buildV3 renders one OpenAPI 3.0 document per group version, each self-contained.
func buildV3(routes []route, b *schemaBuilder, version string) map[string]*spec3.OpenAPI {
	byGV := map[string][]route{}
	for _, r := range routes {
		byGV[r.gvPath] = append(byGV[r.gvPath], r)
	}
	out := make(map[string]*spec3.OpenAPI, len(byGV))
	for gv, rs := range byGV {
		roots := map[string]bool{}
		b.curDeps = roots
		paths := make(map[string]*spec3.Path, len(rs))
		for _, r := range rs {
			item := &spec3.Path{}
			for _, p := range r.params {
				item.Parameters = append(item.Parameters, v3Param(p))
			}
			for _, op := range r.ops {
				o := v3Operation(op, r.tag, b)
				switch op.method {
				case http.MethodGet:
					item.Get = o
				case http.MethodPut:
					item.Put = o
				case http.MethodPost:
					item.Post = o
				case http.MethodPatch:
					item.Patch = o
				case http.MethodDelete:
					item.Delete = o
				}
			}
			paths[r.path] = item
		}
		b.curDeps = nil
		out[gv] = &spec3.OpenAPI{
			Version: "3.0.0",
			Info:    &spec.Info{InfoProps: spec.InfoProps{Title: docTitle, Version: version}},
			Paths:   &spec3.Paths{Paths: paths},
			Components: &spec3.Components{
				Schemas: b.closure(slices.Sorted(maps.Keys(roots))),
				SecuritySchemes: spec3.SecuritySchemes{securitySchemeKey: &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
					Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
				}}},
			},
			SecurityRequirement: []map[string][]string{{securitySchemeKey: {}}},
		}
	}
	return out
}

func v3Param(p param) *spec3.Parameter {
	s := &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{p.typ}, UniqueItems: true}}
	return &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: p.name, In: p.in, Description: p.desc, Required: p.required, Schema: s}}
}

func v3Content(types []string, s *spec.Schema) map[string]*spec3.MediaType {
	out := make(map[string]*spec3.MediaType, len(types))
	for _, t := range types {
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: s}}
	}
	return out
}

func v3Operation(op operation, tag string, b *schemaBuilder) *spec3.Operation {
	o := &spec3.Operation{OperationProps: spec3.OperationProps{
		Tags:        []string{tag},
		Description: op.desc,
		OperationId: op.id,
	}}
	for _, p := range op.params {
		o.Parameters = append(o.Parameters, v3Param(p))
	}
	if op.body != nil {
		s := &spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(op.body)}}
		o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: v3Content(op.consumes(), s), Required: op.bodyRequired}}
	}
	resp := map[int]*spec3.Response{http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: statusText(http.StatusUnauthorized)}}}
	for _, r := range op.responses {
		sr := &spec3.Response{ResponseProps: spec3.ResponseProps{Description: statusText(r.code)}}
		switch {
		case r.typ != nil:
			sr.Content = v3Content(op.produces(), &spec.Schema{SchemaProps: spec.SchemaProps{Ref: b.ref(r.typ)}})
		case r.text:
			sr.Content = v3Content(op.produces(), &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}})
		}
		resp[r.code] = sr
	}
	o.Responses = &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: resp}}
	o.AddExtension(extAction, op.action)
	o.AddExtension(extGVK, gvkExtension(op.gvk))
	return o
}
