package e2e

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/discovery"
)

const (
	// acceptAggregatedJSON is what client-go's discovery client asks for first.
	acceptAggregatedJSON = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	// acceptAggregatedProtobuf is the protobuf form of the same request.
	acceptAggregatedProtobuf = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)

// discoveryEntry is what both discovery formats say about one resource or subresource.
type discoveryEntry struct {
	Kind       string
	Verbs      string
	Namespaced bool
}

// rawGet fetches path with the given headers and returns the response and its body.
func rawGet(t *testing.T, c *http.Client, base, path string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return resp, body
}

// getJSON fetches path as plain JSON into out.
func getJSON(t *testing.T, c *http.Client, base, path string, out any) {
	t.Helper()
	resp, body := rawGet(t, c, base, path, map[string]string{"Accept": "application/json"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("decoding %s: %v\n%s", path, err, body)
	}
}

// isAggregated tells whether a Content-Type names apidiscovery.k8s.io/v2 APIGroupDiscoveryList.
func isAggregated(t *testing.T, contentType string) bool {
	t.Helper()
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		t.Fatalf("Content-Type %q: %v", contentType, err)
	}
	return params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && params["as"] == "APIGroupDiscoveryList"
}

// legacyEntries reads the legacy APIResourceList of one group version.
func legacyEntries(t *testing.T, c *http.Client, base, path string, into map[string]discoveryEntry) {
	t.Helper()
	var list metav1.APIResourceList
	getJSON(t, c, base, path, &list)
	for _, r := range list.APIResources {
		into[list.GroupVersion+" "+r.Name] = discoveryEntry{Kind: r.Kind, Verbs: strings.Join(r.Verbs, ","), Namespaced: r.Namespaced}
	}
}

// aggregatedEntries flattens an aggregated list the way legacy discovery spells it.
func aggregatedEntries(t *testing.T, list *apidiscoveryv2.APIGroupDiscoveryList, into map[string]discoveryEntry) {
	t.Helper()
	for _, g := range list.Items {
		for _, v := range g.Versions {
			if v.Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
				t.Errorf("%s/%s: freshness %q, want Current", g.Name, v.Version, v.Freshness)
			}
			gv := metav1.GroupVersion{Group: g.Name, Version: v.Version}.String()
			for _, r := range v.Resources {
				if r.ResponseKind == nil {
					t.Errorf("%s %s: no responseKind", gv, r.Resource)
					continue
				}
				if got := (metav1.GroupVersion{Group: r.ResponseKind.Group, Version: r.ResponseKind.Version}).String(); got != gv {
					t.Errorf("%s %s: responseKind group version %s", gv, r.Resource, got)
				}
				ns := r.Scope == apidiscoveryv2.ScopeNamespace
				into[gv+" "+r.Resource] = discoveryEntry{Kind: r.ResponseKind.Kind, Verbs: strings.Join(r.Verbs, ","), Namespaced: ns}
				for _, s := range r.Subresources {
					if s.ResponseKind == nil {
						t.Errorf("%s %s/%s: no responseKind", gv, r.Resource, s.Subresource)
						continue
					}
					into[gv+" "+r.Resource+"/"+s.Subresource] = discoveryEntry{Kind: s.ResponseKind.Kind, Verbs: strings.Join(s.Verbs, ","), Namespaced: ns}
				}
			}
		}
	}
}

// contentTypes records the Content-Type of each /api and /apis response a client gets.
type contentTypes struct {
	mu   sync.Mutex
	seen map[string]string
}

func (c *contentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && (req.URL.Path == "/api" || req.URL.Path == "/apis") {
			c.mu.Lock()
			c.seen[req.URL.Path] = resp.Header.Get("Content-Type")
			c.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestAggregatedDiscovery checks that client-go's discovery gets aggregated discovery from
// /api and /apis, that it says exactly what the legacy documents say, and that clients
// that do not ask for it still get the legacy documents.
func TestAggregatedDiscovery(t *testing.T) {
	srv := testserver.StartAPI(t)
	c := srv.HTTPClient(t)
	base := srv.RESTConfig().Host

	t.Run("client-go", func(t *testing.T) {
		cfg := srv.Config(false)
		ct := &contentTypes{seen: map[string]string{}}
		cfg.Wrap(ct.wrap)
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("ServerGroupsAndResources: %v", err)
		}
		for _, p := range []string{"/api", "/apis"} {
			if !isAggregated(t, ct.seen[p]) {
				t.Errorf("%s answered client-go with Content-Type %q, not aggregated discovery", p, ct.seen[p])
			}
		}
		// Legacy discovery would have taken 2 + len(lists) requests.
		t.Logf("client-go discovered %d group versions from 2 aggregated documents", len(lists))
		got := map[string]discoveryEntry{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				got[l.GroupVersion+" "+r.Name] = discoveryEntry{Kind: r.Kind, Verbs: strings.Join(r.Verbs, ","), Namespaced: r.Namespaced}
			}
		}
		want := map[string]discoveryEntry{}
		legacyEntries(t, c, base, "/api/v1", want)
		var legacy metav1.APIGroupList
		getJSON(t, c, base, "/apis", &legacy)
		for _, g := range legacy.Groups {
			for _, v := range g.Versions {
				legacyEntries(t, c, base, "/apis/"+v.GroupVersion, want)
			}
		}
		compareEntries(t, got, want)
		var names []string
		for _, g := range groups {
			names = append(names, g.Name)
		}
		if !slices.Contains(names, "") || !slices.Contains(names, "apps") {
			t.Errorf("ServerGroups = %q, want the core group and apps", names)
		}
		if pods := got["v1 pods"]; pods.Kind != "Pod" || !pods.Namespaced {
			t.Errorf("client-go sees pods as %+v", pods)
		}
	})

	t.Run("raw aggregated equals legacy", func(t *testing.T) {
		scheme := runtime.NewScheme()
		if err := apidiscoveryv2.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		codecs := serializer.NewCodecFactory(scheme)
		fetch := func(t *testing.T, path, accept string) *apidiscoveryv2.APIGroupDiscoveryList {
			t.Helper()
			resp, body := rawGet(t, c, base, path, map[string]string{"Accept": accept})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
			}
			ctype := resp.Header.Get("Content-Type")
			if !isAggregated(t, ctype) {
				t.Fatalf("GET %s Accept %q: Content-Type %q", path, accept, ctype)
			}
			mt, _, _ := mime.ParseMediaType(ctype)
			if want, _, _ := mime.ParseMediaType(accept); mt != want {
				t.Fatalf("GET %s: media type %q, asked for %q", path, mt, want)
			}
			if resp.Header.Get("ETag") == "" {
				t.Errorf("GET %s: no ETag", path)
			}
			obj, gvk, err := codecs.UniversalDeserializer().Decode(body, nil, nil)
			if err != nil {
				t.Fatalf("decoding %s as %s: %v", path, mt, err)
			}
			if gvk.Kind != "APIGroupDiscoveryList" || gvk.GroupVersion() != apidiscoveryv2.SchemeGroupVersion {
				t.Fatalf("GET %s: decoded %v", path, gvk)
			}
			return obj.(*apidiscoveryv2.APIGroupDiscoveryList)
		}
		var legacy metav1.APIGroupList
		getJSON(t, c, base, "/apis", &legacy)
		for _, accept := range []string{acceptAggregatedJSON, acceptAggregatedProtobuf} {
			t.Run(accept, func(t *testing.T) {
				core := fetch(t, "/api", accept)
				if len(core.Items) != 1 || core.Items[0].Name != "" || len(core.Items[0].Versions) != 1 || core.Items[0].Versions[0].Version != "v1" {
					t.Fatalf("/api aggregated is not the core group v1: %+v", core.Items)
				}
				want, got := map[string]discoveryEntry{}, map[string]discoveryEntry{}
				legacyEntries(t, c, base, "/api/v1", want)
				aggregatedEntries(t, core, got)
				groups := fetch(t, "/apis", accept)
				if len(groups.Items) != len(legacy.Groups) {
					t.Fatalf("/apis aggregated has %d groups, legacy %d", len(groups.Items), len(legacy.Groups))
				}
				for i, g := range groups.Items {
					lg := legacy.Groups[i]
					if g.Name != lg.Name {
						t.Errorf("group %d: %q, legacy %q", i, g.Name, lg.Name)
						continue
					}
					if len(g.Versions) != len(lg.Versions) || g.Versions[0].Version != lg.PreferredVersion.Version {
						t.Errorf("group %s: versions %+v, legacy %+v preferring %s", g.Name, g.Versions, lg.Versions, lg.PreferredVersion.Version)
					}
					for _, v := range lg.Versions {
						legacyEntries(t, c, base, "/apis/"+v.GroupVersion, want)
					}
				}
				aggregatedEntries(t, groups, got)
				compareEntries(t, got, want)
				coreRes := core.Items[0].Versions[0].Resources
				i := slices.IndexFunc(coreRes, func(r apidiscoveryv2.APIResourceDiscovery) bool { return r.Resource == "pods" })
				if i < 0 {
					t.Fatal("/api aggregated has no pods")
				}
				pods := coreRes[i]
				if pods.SingularResource != "pod" || !slices.Contains(pods.ShortNames, "po") || !slices.Contains(pods.Categories, "all") {
					t.Errorf("pods: singular %q, shortNames %q, categories %q", pods.SingularResource, pods.ShortNames, pods.Categories)
				}
				if !slices.ContainsFunc(pods.Subresources, func(s apidiscoveryv2.APISubresourceDiscovery) bool {
					return s.Subresource == "status" && s.ResponseKind != nil && s.ResponseKind.Kind == "Pod" && slices.Contains(s.Verbs, "get")
				}) {
					t.Errorf("pods subresources lack status: %+v", pods.Subresources)
				}
			})
		}
	})

	t.Run("negotiation", func(t *testing.T) {
		// clientGo is client-go v0.37's discovery Accept header.
		clientGo := acceptAggregatedJSON + ",application/json"
		cases := []struct {
			name, path, accept string
			aggregated         bool
			// legacyKind is the kind of a legacy answer.
			legacyKind string
		}{
			{"plain json /apis", "/apis", "application/json", false, "APIGroupList"},
			{"plain json /api", "/api", "application/json", false, "APIVersions"},
			{"no accept", "/apis", "", false, "APIGroupList"},
			{"any", "/apis", "*/*", false, "APIGroupList"},
			{"v2beta1 only", "/apis", "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", false, "APIGroupList"},
			{"other kind", "/apis", "application/json;g=meta.k8s.io;v=v1;as=Table,application/json", false, "APIGroupList"},
			{"client-go /api", "/api", clientGo, true, ""},
			{"client-go /apis", "/apis", clientGo, true, ""},
			{"nopeer profile", "/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList;profile=nopeer," + clientGo, true, ""},
			{"protobuf first", "/apis", acceptAggregatedProtobuf + "," + clientGo, true, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h := map[string]string{}
				if tc.accept != "" {
					h["Accept"] = tc.accept
				}
				resp, body := rawGet(t, c, base, tc.path, h)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", resp.Status, body)
				}
				ctype := resp.Header.Get("Content-Type")
				if got := isAggregated(t, ctype); got != tc.aggregated {
					t.Fatalf("Content-Type %q: aggregated %v, want %v", ctype, got, tc.aggregated)
				}
				if tc.aggregated {
					return
				}
				var tm metav1.TypeMeta
				if err := json.Unmarshal(body, &tm); err != nil || tm.Kind != tc.legacyKind {
					t.Fatalf("legacy answer kind %q (err %v), want %s:\n%s", tm.Kind, err, tc.legacyKind, body)
				}
				if resp.Header.Get("ETag") != "" {
					t.Errorf("legacy answer has an ETag")
				}
			})
		}
	})

	t.Run("etag", func(t *testing.T) {
		resp, _ := rawGet(t, c, base, "/apis", map[string]string{"Accept": acceptAggregatedJSON})
		etag := resp.Header.Get("ETag")
		if etag == "" || resp.Header.Get("Vary") != "Accept" {
			t.Fatalf("ETag %q, Vary %q", etag, resp.Header.Get("Vary"))
		}
		resp, body := rawGet(t, c, base, "/apis", map[string]string{"Accept": acceptAggregatedJSON, "If-None-Match": etag})
		if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
			t.Errorf("If-None-Match %s: %s with %d bytes, want 304 and no body", etag, resp.Status, len(body))
		}
		resp, _ = rawGet(t, c, base, "/apis", map[string]string{"Accept": acceptAggregatedJSON, "If-None-Match": `"stale"`})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("stale If-None-Match: %s, want 200", resp.Status)
		}
		resp, _ = rawGet(t, c, base, "/apis", map[string]string{"Accept": acceptAggregatedProtobuf})
		if got := resp.Header.Get("ETag"); got != etag {
			t.Errorf("protobuf ETag %q, JSON %q: the document is the same", got, etag)
		}
	})
}

// compareEntries reports every resource the two discovery formats disagree on.
func compareEntries(t *testing.T, got, want map[string]discoveryEntry) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("legacy discovery lists no resources")
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in legacy discovery only", k)
		} else if g != w {
			t.Errorf("%s: aggregated %+v, legacy %+v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: in aggregated discovery only", k)
		}
	}
}
