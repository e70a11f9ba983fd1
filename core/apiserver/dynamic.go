package apiserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// DynamicGroupVersion is what one owner (a CustomResourceDefinition) serves in one group
// version while it runs.
type DynamicGroupVersion struct {
	// GroupVersion served; its group must not be one of the built-in groups.
	GroupVersion schema.GroupVersion
	// Resources served in it.
	Resources []*endpoints.APIResource
	// Warning, when set, is added to every response of the group version (a deprecated
	// custom resource version).
	Warning string
}

// dynamicAPI holds the resources added and removed while the server runs. Requests read
// an immutable snapshot; writers rebuild it under mu.
type dynamicAPI struct {
	mu     sync.Mutex
	owners map[string][]DynamicGroupVersion
	state  atomic.Pointer[dynamicState]
}

// dynamicState is one snapshot: the routes of every dynamic group version and the /apis
// discovery documents of built-in and dynamic groups together.
type dynamicState struct {
	// container routes /apis/<group>/... of dynamic groups.
	container *restful.Container
	// groups are the dynamic groups' names.
	groups map[string]bool
	// warnings by "/apis/<group>/<version>".
	warnings map[string]string
	// apis answers GET /apis (legacy or aggregated).
	apis restful.RouteFunction
}

// SetDynamic serves gvs for owner, replacing what owner served before; nil stops serving
// it. Routing and discovery change at once for the requests that follow.
func (s *Server) SetDynamic(owner string, gvs []DynamicGroupVersion) {
	s.dynamic.mu.Lock()
	defer s.dynamic.mu.Unlock()
	if s.dynamic.owners == nil {
		s.dynamic.owners = map[string][]DynamicGroupVersion{}
	}
	if gvs == nil {
		delete(s.dynamic.owners, owner)
	} else {
		s.dynamic.owners[owner] = gvs
	}
	s.dynamic.state.Store(s.buildDynamicState())
}

// buildDynamicState assembles a snapshot from the owners (under dynamic.mu).
func (s *Server) buildDynamicState() *dynamicState {
	static := map[string]bool{}
	for _, g := range s.groups {
		static[g.gv.Group] = true
	}
	st := &dynamicState{groups: map[string]bool{}, warnings: map[string]string{}}
	byGV := map[schema.GroupVersion]*groupVersion{}
	owners := make([]string, 0, len(s.dynamic.owners))
	for o := range s.dynamic.owners {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		for _, d := range s.dynamic.owners[o] {
			if static[d.GroupVersion.Group] {
				slog.Warn("a custom resource in a built-in group is not served", "groupVersion", d.GroupVersion, "owner", o)
				continue
			}
			g, ok := byGV[d.GroupVersion]
			if !ok {
				g = &groupVersion{gv: d.GroupVersion}
				byGV[d.GroupVersion] = g
			}
			g.resources = append(g.resources, d.Resources...)
			if d.Warning != "" {
				st.warnings[rootOf(d.GroupVersion)] = d.Warning
			}
			st.groups[d.GroupVersion.Group] = true
		}
	}
	dyn := make([]groupVersion, 0, len(byGV))
	for _, g := range byGV {
		sort.Slice(g.resources, func(i, j int) bool {
			return g.resources[i].Scope.Store.Resource.Name < g.resources[j].Scope.Store.Resource.Name
		})
		dyn = append(dyn, *g)
	}
	// Groups by name; within a group the preferred (highest, Kubernetes-aware) version first.
	sort.Slice(dyn, func(i, j int) bool {
		if dyn[i].gv.Group != dyn[j].gv.Group {
			return dyn[i].gv.Group < dyn[j].gv.Group
		}
		return version.CompareKubeAwareVersionStrings(dyn[i].gv.Version, dyn[j].gv.Version) > 0
	})
	c := restful.NewContainer()
	c.Router(restful.CurlyRouter{})
	c.ServiceErrorHandler(func(se restful.ServiceError, req *restful.Request, resp *restful.Response) {
		err := endpoints.NotFound()
		if se.Code == http.StatusMethodNotAllowed {
			err = apierrors.NewMethodNotSupported(schema.GroupResource{}, req.Request.Method)
		}
		s.codecs.WriteError(resp.ResponseWriter, req.Request, err)
	})
	for _, g := range dyn {
		ws := endpoints.NewWebService(rootOf(g.gv), g.resources)
		s.addVersionDiscovery(ws, g)
		c.Add(ws)
	}
	all := append(slices.Clone(s.groups), dyn...)
	list := groupListOf(all)
	for i := range list.Groups {
		if !st.groups[list.Groups[i].Name] {
			continue
		}
		gs := newService("/apis/" + list.Groups[i].Name)
		gs.Route(gs.GET("/").To(s.serveStatic(&list.Groups[i])))
		c.Add(gs)
	}
	st.container = c
	legacy := s.serveStatic(list)
	st.apis = legacy
	apiList, apisList, err := aggregatedDocumentsOf(all, list)
	if err == nil {
		var doc *aggregatedDocument
		if doc, err = newAggregatedDocument(apisList); err == nil {
			st.apis = withAggregated(doc, legacy)
		}
	}
	_ = apiList
	if err != nil {
		slog.Error("aggregated discovery of /apis disabled: serving legacy discovery only", "err", fmt.Errorf("building the documents: %w", err))
	}
	return st
}

// withDynamic serves /apis and the dynamic groups from the current snapshot and hands
// everything else to next.
func (s *Server) withDynamic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		st := s.dynamic.state.Load()
		if st == nil {
			next.ServeHTTP(w, req)
			return
		}
		p := req.URL.Path
		if p == "/apis" || p == "/apis/" {
			if req.Method != http.MethodGet {
				next.ServeHTTP(w, req)
				return
			}
			st.apis(restful.NewRequest(req), restful.NewResponse(w))
			return
		}
		rest, ok := strings.CutPrefix(p, "/apis/")
		if !ok {
			next.ServeHTTP(w, req)
			return
		}
		group, after, _ := strings.Cut(rest, "/")
		if !st.groups[group] {
			next.ServeHTTP(w, req)
			return
		}
		if v, _, _ := strings.Cut(after, "/"); v != "" {
			if msg := st.warnings["/apis/"+group+"/"+v]; msg != "" {
				w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
			}
		}
		st.container.ServeHTTP(w, req)
	})
}
