package apiserver

import (
	"net/http"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// discoveryServices returns the web services of /api, /apis and /apis/<group>; each
// group version's own document is a route of its service (see addVersionDiscovery),
// because go-restful routes a path to the service with the longest matching root.
func (s *Server) discoveryServices() []*restful.WebService {
	legacyAPI := func(req *restful.Request, resp *restful.Response) {
		s.codecs.WriteNegotiated(resp.ResponseWriter, req.Request, http.StatusOK, &metav1.APIVersions{
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: req.Request.Host}},
		})
	}
	list := s.groupList()
	// Clients of k8s.io v0.26+ ask /api and /apis for aggregated discovery first (see
	// aggregated.go); the legacy documents stay for everyone else.
	apiRoute, apisRoute := s.aggregatedRoutes(list, legacyAPI, s.serveStatic(list))
	api := newService("/api")
	api.Route(api.GET("/").To(apiRoute))
	apis := newService("/apis")
	apis.Route(apis.GET("/").To(apisRoute))
	out := []*restful.WebService{api, apis}
	for i := range list.Groups {
		g := newService("/apis/" + list.Groups[i].Name)
		g.Route(g.GET("/").To(s.serveStatic(&list.Groups[i])))
		out = append(out, g)
	}
	return out
}

func newService(root string) *restful.WebService {
	ws := new(restful.WebService)
	ws.Path(root).Consumes("*/*").Produces("*/*")
	return ws
}

func (s *Server) serveStatic(obj runtime.Object) restful.RouteFunction {
	return func(req *restful.Request, resp *restful.Response) {
		s.codecs.WriteNegotiated(resp.ResponseWriter, req.Request, http.StatusOK, obj)
	}
}

// addVersionDiscovery serves a group version's APIResourceList at its root.
func (s *Server) addVersionDiscovery(ws *restful.WebService, g groupVersion) {
	ws.Route(ws.GET("/").To(s.serveStatic(endpoints.Discovery(g.gv, g.resources))))
}

// groupList is the /apis document.
func (s *Server) groupList() *metav1.APIGroupList { return groupListOf(s.groups) }

// groupListOf is the /apis document of groups, in their order; a group's first version
// is its preferred one.
func groupListOf(groups []groupVersion) *metav1.APIGroupList {
	out := &metav1.APIGroupList{}
	index := map[string]int{}
	for _, g := range groups {
		if g.gv.Group == "" {
			continue
		}
		v := metav1.GroupVersionForDiscovery{GroupVersion: g.gv.String(), Version: g.gv.Version}
		i, ok := index[g.gv.Group]
		if !ok {
			i = len(out.Groups)
			index[g.gv.Group] = i
			out.Groups = append(out.Groups, metav1.APIGroup{Name: g.gv.Group, PreferredVersion: v})
		}
		out.Groups[i].Versions = append(out.Groups[i].Versions, v)
	}
	return out
}
