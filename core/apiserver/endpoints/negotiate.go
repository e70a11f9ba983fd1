// Package endpoints serves the REST verbs of registry resources over HTTP with Kubernetes'
// wire behaviour: content negotiation, Status errors, Tables, watch streams and patches.
package endpoints

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/munnerz/goautoneg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Output describes how a response is encoded.
type Output struct {
	// Info is the serializer for the media type.
	Info runtime.SerializerInfo
	// As is "Table", "PartialObjectMetadata", "PartialObjectMetadataList" or "".
	As string
}

// Codecs bundles the scheme and its serializers.
type Codecs struct {
	// Scheme knows every served type.
	Scheme *runtime.Scheme
	// Factory is the codec factory for Scheme (strict serializers enabled).
	Factory serializer.CodecFactory
	// Params decodes query parameters into option types (ListOptions, …).
	Params runtime.ParameterCodec
	// NoProtobuf refuses protobuf for objects (custom resources are JSON and YAML only, as
	// in Kubernetes); Tables and object metadata may still be protobuf.
	NoProtobuf bool
	// NoTable refuses Table output (a resource without a Table form).
	NoTable bool
}

// DecodeParams decodes query parameters into opts (ListOptions, DeleteOptions, …).
func (c *Codecs) DecodeParams(q url.Values, opts runtime.Object) error {
	gv := schema.GroupVersion{Version: "v1"}
	if _, ok := opts.(*metav1.TableOptions); ok {
		gv = metav1.SchemeGroupVersion
	}
	return c.Params.DecodeParameters(q, gv, opts)
}

// NewCodecs returns codecs over s.
func NewCodecs(s *runtime.Scheme) *Codecs {
	return &Codecs{Scheme: s, Factory: serializer.NewCodecFactory(s, serializer.EnableStrict), Params: runtime.NewParameterCodec(s)}
}

func (c *Codecs) infoFor(mediaType string) (runtime.SerializerInfo, bool) {
	for _, info := range c.Factory.SupportedMediaTypes() {
		if info.MediaType == mediaType {
			return info, true
		}
	}
	return runtime.SerializerInfo{}, false
}

// WithoutProtobuf returns a copy of c that refuses protobuf objects (NoProtobuf).
func (c *Codecs) WithoutProtobuf() *Codecs {
	cp := *c
	cp.NoProtobuf = true
	return &cp
}

// WithoutTable returns a copy of c that refuses Table output (NoTable).
func (c *Codecs) WithoutTable() *Codecs {
	cp := *c
	cp.NoTable = true
	return &cp
}

// objectMediaType reports whether objects may be encoded or decoded as mediaType.
func (c *Codecs) objectMediaType(mediaType string) bool {
	return !c.NoProtobuf || mediaType != runtime.ContentTypeProtobuf
}

// JSON is the fallback serializer.
func (c *Codecs) JSON() runtime.SerializerInfo {
	info, _ := c.infoFor(runtime.ContentTypeJSON)
	return info
}

// NegotiateOutput picks the response encoding from the Accept header; ok is false when
// nothing acceptable is offered (406).
func (c *Codecs) NegotiateOutput(req *http.Request) (Output, error) {
	header := req.Header.Get("Accept")
	if header == "" {
		return Output{Info: c.JSON()}, nil
	}
	for _, clause := range goautoneg.ParseAccept(header) {
		mt := clause.Type + "/" + clause.SubType
		if clause.Type == "*" || mt == "application/*" {
			mt = runtime.ContentTypeJSON
		}
		info, ok := c.infoFor(mt)
		if !ok {
			continue
		}
		as := clause.Params["as"]
		if as == "" && !c.objectMediaType(mt) {
			continue
		}
		if as != "" {
			g, v := clause.Params["g"], clause.Params["v"]
			if g != "meta.k8s.io" || (v != "v1" && v != "v1beta1") {
				continue
			}
			switch as {
			case "Table":
				if c.NoTable {
					continue
				}
			case "PartialObjectMetadata", "PartialObjectMetadataList":
			default:
				continue
			}
		}
		return Output{Info: info, As: as}, nil
	}
	return Output{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schemaGR(), "",
		fmt.Sprintf("only the following media types are accepted: %s", strings.Join(c.mediaTypes(), ", ")), 0, false)
}

func (c *Codecs) mediaTypes() []string {
	var out []string
	for _, info := range c.Factory.SupportedMediaTypes() {
		if c.objectMediaType(info.MediaType) {
			out = append(out, info.MediaType)
		}
	}
	return out
}

// NegotiateInput picks the decoder for the request body's Content-Type (415 if unknown).
func (c *Codecs) NegotiateInput(req *http.Request) (runtime.SerializerInfo, error) {
	ct := req.Header.Get("Content-Type")
	if ct == "" {
		return c.JSON(), nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return runtime.SerializerInfo{}, unsupportedMediaType(ct, c.mediaTypes())
	}
	info, ok := c.infoFor(mt)
	if !ok || !c.objectMediaType(mt) {
		return runtime.SerializerInfo{}, unsupportedMediaType(ct, c.mediaTypes())
	}
	return info, nil
}

func unsupportedMediaType(ct string, supported []string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schemaGR(), "",
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(supported, ", ")), 0, false)
}
