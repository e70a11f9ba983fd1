package apiserver

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/munnerz/goautoneg"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// The type a client names in its Accept header to get aggregated discovery. Only v2
// counts: Kubernetes 1.35+ locks AggregatedDiscoveryRemoveBetaType on, so a v2beta1
// request gets the legacy document there too.
const (
	aggregatedGroup   = "apidiscovery.k8s.io"
	aggregatedVersion = "v2"
	aggregatedKind    = "APIGroupDiscoveryList"
	// aggregatedParams name the type in a media type, in client-go's order (g, v, as).
	aggregatedParams = ";g=" + aggregatedGroup + ";v=" + aggregatedVersion + ";as=" + aggregatedKind
)

// aggregatedDocument is one aggregated discovery document (of /api or of /apis). It is
// encoded on first use, once per media type asked for: the served resources change with
// every CustomResourceDefinition, and most of those documents are never read.
type aggregatedDocument struct {
	list *apidiscoveryv2.APIGroupDiscoveryList

	prepared sync.Once
	// err is why the document cannot be encoded; set by prepare.
	err error
	// encoders by media type, and media in Kubernetes' negotiation order (JSON, YAML,
	// protobuf); set by prepare.
	encoders map[string]runtime.Encoder
	media    []runtime.SerializerInfo
	// etag is the quoted ETag (sha512 of the JSON, as Kubernetes computes it).
	etag string

	mu sync.Mutex
	// bodies holds each media type's encoding once made.
	bodies map[string][]byte
}

// newAggregatedDocument returns list's document, encoded when first served.
func newAggregatedDocument(list *apidiscoveryv2.APIGroupDiscoveryList) *aggregatedDocument {
	return &aggregatedDocument{list: list, bodies: map[string][]byte{}}
}

// prepare sets up the encoders and the ETag, once.
func (d *aggregatedDocument) prepare() error {
	d.prepared.Do(func() {
		scheme := runtime.NewScheme()
		if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
			d.err = fmt.Errorf("registering apidiscovery.k8s.io/v2: %w", err)
			return
		}
		codecs := serializer.NewCodecFactory(scheme)
		d.encoders = map[string]runtime.Encoder{}
		for _, info := range codecs.SupportedMediaTypes() {
			d.media = append(d.media, info)
			d.encoders[info.MediaType] = codecs.EncoderForVersion(info.Serializer, apidiscoveryv2.SchemeGroupVersion)
		}
		// Like Kubernetes' calculateETag: the hash of the plain JSON of the list, so that
		// the ETag is the same whatever encoding a client asks for.
		raw, err := json.Marshal(d.list)
		if err != nil {
			d.err = fmt.Errorf("hashing aggregated discovery: %w", err)
			return
		}
		d.etag = strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(raw)))
	})
	return d.err
}

// body is the document encoded as mediaType.
func (d *aggregatedDocument) body(mediaType string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.bodies[mediaType]; ok {
		return b, nil
	}
	var buf bytes.Buffer
	if err := d.encoders[mediaType].Encode(d.list, &buf); err != nil {
		return nil, fmt.Errorf("encoding aggregated discovery as %s: %w", mediaType, err)
	}
	d.bodies[mediaType] = buf.Bytes()
	return buf.Bytes(), nil
}

// negotiate returns the media type to answer an aggregated discovery request in, or false
// when the Accept header asks for no apidiscovery.k8s.io/v2 APIGroupDiscoveryList this
// server can encode. Like Kubernetes' discovery endpoint restrictions, it only considers
// clauses naming that type (in the header's quality order); the first one that matches a
// served media type wins, however a plain clause ranks.
func (d *aggregatedDocument) negotiate(accept string) (runtime.SerializerInfo, bool) {
	if accept == "" {
		return runtime.SerializerInfo{}, false
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		p := clause.Params
		if p["g"] != aggregatedGroup || p["v"] != aggregatedVersion || p["as"] != aggregatedKind {
			continue
		}
		// No server-version conversion on discovery, and no watch of it here.
		if p["sv"] != "" || p["stream"] != "" {
			continue
		}
		for _, info := range d.media {
			if (clause.Type == info.MediaTypeType && (clause.SubType == info.MediaTypeSubType || clause.SubType == "*")) ||
				(clause.Type == "*" && clause.SubType == "*") {
				return info, true
			}
		}
	}
	return runtime.SerializerInfo{}, false
}

// serve writes the document in info's media type, with Kubernetes' caching headers: an
// ETag, 304 for a matching If-None-Match, and Vary: Accept because the same URL also
// serves the legacy document.
func (d *aggregatedDocument) serve(w http.ResponseWriter, req *http.Request, info runtime.SerializerInfo) {
	h := w.Header()
	h.Set("Vary", "Accept")
	h.Set("ETag", d.etag)
	h.Set("Cache-Control", "public")
	if req.Header.Get("If-None-Match") == d.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body, err := d.body(info.MediaType)
	if err != nil {
		h.Del("ETag")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	// The media type names the kind, as kube-apiserver's generateMediaTypeWithGVK does:
	// client-go decodes the body as aggregated discovery only when the Content-Type says so.
	h.Set("Content-Type", info.MediaType+aggregatedParams)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// serveAggregated serves doc to a request that asks for aggregated discovery and
// reports whether it did; a nil doc, or one that cannot be encoded, serves nothing (the
// legacy document is served instead).
func serveAggregated(doc *aggregatedDocument, w http.ResponseWriter, req *http.Request) bool {
	if doc == nil || doc.prepare() != nil {
		return false
	}
	info, ok := doc.negotiate(req.Header.Get("Accept"))
	if ok {
		doc.serve(w, req, info)
	}
	return ok
}

// errNoDocument says a listed group version has no resource list.
var errNoDocument = errors.New("no discovery document")

// aggregatedDocuments builds the aggregated documents of /api (the core group) and /apis
// (every other group, in the order and with the preferred version of the legacy list)
// from the same APIResourceLists the legacy /api/v1 and /apis/<group>/<version> serve.
func aggregatedDocuments(versions map[schema.GroupVersion]*metav1.APIResourceList, groups *metav1.APIGroupList) (api, apis *apidiscoveryv2.APIGroupDiscoveryList, err error) {
	version := func(gv schema.GroupVersion) (apidiscoveryv2.APIVersionDiscovery, error) {
		list, ok := versions[gv]
		if !ok {
			return apidiscoveryv2.APIVersionDiscovery{}, errNoDocument
		}
		res, err := aggregatedResources(gv, list.APIResources)
		if err != nil {
			return apidiscoveryv2.APIVersionDiscovery{}, fmt.Errorf("group version %s: %w", gv, err)
		}
		return apidiscoveryv2.APIVersionDiscovery{Version: gv.Version, Resources: res, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}, nil
	}
	api = &apidiscoveryv2.APIGroupDiscoveryList{}
	if _, ok := versions[schema.GroupVersion{Version: "v1"}]; ok {
		core, err := version(schema.GroupVersion{Version: "v1"})
		if err != nil {
			return nil, nil, err
		}
		api.Items = []apidiscoveryv2.APIGroupDiscovery{{Versions: []apidiscoveryv2.APIVersionDiscovery{core}}}
	}
	apis = &apidiscoveryv2.APIGroupDiscoveryList{}
	for _, lg := range groups.Groups {
		g := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: lg.Name}}
		// Clients take the first version as the preferred one.
		order := []string{lg.PreferredVersion.Version}
		for _, v := range lg.Versions {
			if v.Version != lg.PreferredVersion.Version {
				order = append(order, v.Version)
			}
		}
		for _, v := range order {
			vd, err := version(schema.GroupVersion{Group: lg.Name, Version: v})
			if errors.Is(err, errNoDocument) {
				// An aggregated server that has not answered yet: listed in the legacy
				// document, left out here until its resources are known.
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			g.Versions = append(g.Versions, vd)
		}
		if len(g.Versions) > 0 {
			apis.Items = append(apis.Items, g)
		}
	}
	return api, apis, nil
}

// aggregatedResources turns a legacy resource list into aggregated entries, as
// kube-apiserver's ConvertGroupVersionIntoToDiscovery: "name/sub" entries become
// subresources of their parent. Kinds without a group and version are gv's.
func aggregatedResources(gv schema.GroupVersion, list []metav1.APIResource) ([]apidiscoveryv2.APIResourceDiscovery, error) {
	kind := func(r metav1.APIResource) *metav1.GroupVersionKind {
		if r.Group == "" && r.Version == "" {
			return &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind}
		}
		return &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	}
	scope := func(r metav1.APIResource) apidiscoveryv2.ResourceScope {
		if r.Namespaced {
			return apidiscoveryv2.ScopeNamespace
		}
		return apidiscoveryv2.ScopeCluster
	}
	var out []apidiscoveryv2.APIResourceDiscovery
	parents := map[string]int{}
	for _, r := range list {
		if strings.Contains(r.Name, "/") {
			continue
		}
		parents[r.Name] = len(out)
		out = append(out, apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.Name,
			ResponseKind:     kind(r),
			Scope:            scope(r),
			SingularResource: r.SingularName,
			Verbs:            r.Verbs,
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
		})
	}
	for _, r := range list {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, ok := parents[parent]
		if !ok {
			return nil, fmt.Errorf("subresource %s has no parent resource", r.Name)
		}
		if out[i].Scope != scope(r) {
			return nil, fmt.Errorf("subresource %s is %s but its parent is %s", r.Name, scope(r), out[i].Scope)
		}
		verbs := r.Verbs
		if verbs == nil {
			// The field is required: a subresource without verbs is an empty list.
			verbs = []string{}
		}
		out[i].Subresources = append(out[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, ResponseKind: kind(r), Verbs: verbs})
	}
	return out, nil
}
