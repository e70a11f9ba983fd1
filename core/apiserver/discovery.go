package apiserver

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// discovery holds the discovery documents of one set of served resources: the legacy
// /api, /apis, /apis/GROUP and per-version documents, and the aggregated documents of
// /api and /apis (nil when they could not be built: legacy discovery only).
type discovery struct {
	versions  map[schema.GroupVersion]*metav1.APIResourceList
	groups    map[string]*metav1.APIGroup
	groupList *metav1.APIGroupList
	api, apis *aggregatedDocument
}

// newDiscovery builds every discovery document of routes.
func newDiscovery(routes *endpoints.Routes) *discovery {
	d := &discovery{versions: map[schema.GroupVersion]*metav1.APIResourceList{}, groups: map[string]*metav1.APIGroup{}}
	for _, gv := range routes.GroupVersions() {
		d.versions[gv] = endpoints.Discovery(gv, routes.Version(gv).Resources)
	}
	d.groupList = groupList(routes.GroupVersions())
	for i := range d.groupList.Groups {
		d.groups[d.groupList.Groups[i].Name] = &d.groupList.Groups[i]
	}
	apiList, apisList, err := aggregatedDocuments(d.versions, d.groupList)
	if err == nil {
		d.api, err = newAggregatedDocument(apiList)
	}
	if err == nil {
		d.apis, err = newAggregatedDocument(apisList)
	}
	if err != nil {
		slog.Error("aggregated discovery disabled: serving legacy discovery only", "err", err)
		d.api, d.apis = nil, nil
	}
	return d
}

// document returns the server of the discovery document at path, nil when path is not
// one (or names a group or version that is not served).
func (d *discovery) document(path string) func(s *Server, w http.ResponseWriter, req *http.Request) {
	path = strings.TrimSuffix(path, "/")
	switch path {
	case "/api":
		return func(s *Server, w http.ResponseWriter, req *http.Request) {
			if serveAggregated(d.api, w, req) {
				return
			}
			s.codecs.WriteNegotiated(w, req, http.StatusOK, &metav1.APIVersions{
				Versions:                   []string{"v1"},
				ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: req.Host}},
			})
		}
	case "/apis":
		return func(s *Server, w http.ResponseWriter, req *http.Request) {
			if serveAggregated(d.apis, w, req) {
				return
			}
			s.codecs.WriteNegotiated(w, req, http.StatusOK, d.groupList)
		}
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var obj runtime.Object
	switch {
	case len(parts) == 2 && parts[0] == "api":
		if l := d.versions[schema.GroupVersion{Version: parts[1]}]; l != nil {
			obj = l
		}
	case len(parts) == 2 && parts[0] == "apis":
		if g := d.groups[parts[1]]; g != nil {
			obj = g
		}
	case len(parts) == 3 && parts[0] == "apis":
		if l := d.versions[schema.GroupVersion{Group: parts[1], Version: parts[2]}]; l != nil {
			obj = l
		}
	}
	if obj == nil {
		return nil
	}
	return func(s *Server, w http.ResponseWriter, req *http.Request) {
		s.codecs.WriteNegotiated(w, req, http.StatusOK, obj)
	}
}

// groupList is the /apis document of gvs (sorted): each group with its versions, the
// first one preferred.
func groupList(gvs []schema.GroupVersion) *metav1.APIGroupList {
	out := &metav1.APIGroupList{}
	index := map[string]int{}
	for _, gv := range gvs {
		if gv.Group == "" {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		i, ok := index[gv.Group]
		if !ok {
			i = len(out.Groups)
			index[gv.Group] = i
			out.Groups = append(out.Groups, metav1.APIGroup{Name: gv.Group, PreferredVersion: v})
		}
		out.Groups[i].Versions = append(out.Groups[i].Versions, v)
	}
	return out
}
