package apiserver

import (
	"cmp"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/wasmplane/wasmplane/core/apiserver/aggregator"
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

// newDiscovery builds every discovery document of routes and of the group versions
// aggregated servers serve (which take the place of a local one of the same name).
func newDiscovery(routes *endpoints.Routes, aggregated []aggregator.Version) *discovery {
	d := &discovery{versions: map[schema.GroupVersion]*metav1.APIResourceList{}, groups: map[string]*metav1.APIGroup{}}
	gvs := routes.GroupVersions()
	for _, gv := range gvs {
		d.versions[gv] = endpoints.Discovery(gv, routes.Version(gv).Resources)
	}
	for _, v := range aggregated {
		// A server that has not answered yet is listed, without resources.
		delete(d.versions, v.GroupVersion)
		if v.Resources != nil {
			d.versions[v.GroupVersion] = v.Resources
		}
	}
	d.groupList = groupList(withAggregated(gvs, aggregated))
	for i := range d.groupList.Groups {
		d.groups[d.groupList.Groups[i].Name] = &d.groupList.Groups[i]
	}
	apiList, apisList, err := aggregatedDocuments(d.versions, d.groupList)
	if err != nil {
		slog.Error("aggregated discovery disabled: serving legacy discovery only", "err", err)
		return d
	}
	d.api, d.apis = newAggregatedDocument(apiList), newAggregatedDocument(apisList)
	return d
}

// withAggregated adds the aggregated group versions missing from gvs: a version of a
// listed group after that group's, a new group before the first local group of lower
// priority, as kube-aggregator orders groups by groupPriorityMinimum.
func withAggregated(gvs []schema.GroupVersion, aggregated []aggregator.Version) []schema.GroupVersion {
	extra := slices.Clone(aggregated)
	slices.SortFunc(extra, func(a, b aggregator.Version) int {
		return cmp.Or(cmp.Compare(b.GroupPriority, a.GroupPriority), cmp.Compare(a.GroupVersion.Group, b.GroupVersion.Group),
			cmp.Compare(b.VersionPriority, a.VersionPriority), cmp.Compare(a.GroupVersion.Version, b.GroupVersion.Version))
	})
	out := slices.Clone(gvs)
	for _, v := range extra {
		if slices.Contains(out, v.GroupVersion) {
			continue
		}
		at, last := len(out), -1
		for i, gv := range out {
			if gv.Group == v.GroupVersion.Group {
				last = i
			}
		}
		if last >= 0 {
			at = last + 1
		} else {
			for i, gv := range out {
				if gv.Group != "" && builtinAPIServicePriority(gv).group < v.GroupPriority {
					at = i
					break
				}
			}
		}
		out = slices.Insert(out, at, v.GroupVersion)
	}
	return out
}

// mergedDiscovery is the discovery of one snapshot with one generation of the
// aggregated group versions.
type mergedDiscovery struct {
	snap *snapshot
	gen  uint64
	disc *discovery
}

// discoveryOf returns the discovery documents of snap with the aggregated group versions.
func (s *Server) discoveryOf(snap *snapshot) *discovery {
	gen, n := s.aggregator.Generation()
	if n == 0 {
		return snap.disc
	}
	if m := s.merged.Load(); m != nil && m.snap == snap && m.gen == gen {
		return m.disc
	}
	agg := s.aggregator.Discovery()
	d := newDiscovery(snap.routes, agg.Versions)
	s.merged.Store(&mergedDiscovery{snap: snap, gen: agg.Gen, disc: d})
	return d
}

// aggregatedPath returns the group version of a path at or below /apis/GROUP/VERSION.
func aggregatedPath(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: parts[0], Version: parts[1]}, true
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
