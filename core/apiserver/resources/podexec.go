package resources

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/filters"
	"github.com/wasmplane/wasmplane/core/authz"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// streamSubresources are the pods' connect subresources: each proxies the client's
// upgraded connection (WebSocket or SPDY) to the kubelet of the pod's node.
var streamSubresources = map[string]func(pod *corev1.Pod, q url.Values) (*url.URL, string, error){
	"exec":        execLocation,
	"attach":      attachLocation,
	"portforward": portForwardLocation,
}

// streamFlags reads PodExecOptions' or PodAttachOptions' stream booleans from the query,
// with their defaults (stdout and stderr on), and names them as the kubelet URL does.
func streamFlags(q url.Values) (url.Values, error) {
	out := url.Values{}
	some := false
	for _, f := range []struct {
		param, kubelet string
		def            bool
	}{{"stdin", "input", false}, {"stdout", "output", true}, {"stderr", "error", true}, {"tty", "tty", false}} {
		on := f.def
		if v := q.Get(f.param); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q", f.param, v))
			}
			on = b
		}
		if on {
			out.Set(f.kubelet, "1")
			some = some || f.param != "tty"
		}
	}
	if !some {
		return nil, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	return out, nil
}

func execLocation(pod *corev1.Pod, q url.Values) (*url.URL, string, error) {
	container, err := podContainer(pod, q.Get("container"))
	if err != nil {
		return nil, "", err
	}
	params, err := streamFlags(q)
	if err != nil {
		return nil, "", err
	}
	if len(q["command"]) == 0 {
		return nil, "", apierrors.NewBadRequest("you must specify at least 1 command")
	}
	params["command"] = q["command"]
	return &url.URL{Path: "/exec/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + url.PathEscape(container),
		RawQuery: params.Encode()}, container, nil
}

func attachLocation(pod *corev1.Pod, q url.Values) (*url.URL, string, error) {
	container, err := podContainer(pod, q.Get("container"))
	if err != nil {
		return nil, "", err
	}
	params, err := streamFlags(q)
	if err != nil {
		return nil, "", err
	}
	return &url.URL{Path: "/attach/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/" + url.PathEscape(container),
		RawQuery: params.Encode()}, container, nil
}

func portForwardLocation(pod *corev1.Pod, q url.Values) (*url.URL, string, error) {
	params := url.Values{}
	for _, v := range q["ports"] {
		if p, err := strconv.ParseUint(v, 10, 16); err != nil || p == 0 {
			return nil, "", apierrors.NewBadRequest(fmt.Sprintf("invalid port %q: must be between 1 and 65535", v))
		}
		params.Add("port", v)
	}
	return &url.URL{Path: "/portForward/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name), RawQuery: params.Encode()}, "", nil
}

// podStreamHandler serves a connect subresource: it checks the pod and its container and
// proxies the upgraded connection to the kubelet, as kube-apiserver's UpgradeAwareHandler
// does.
func podStreamHandler(s *endpoints.Scope, kc KubeletConnection, sub string) endpoints.HandlerFunc {
	locate := streamSubresources[sub]
	transport := KubeletTransport(kc.TLS)
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		fail := func(err error) { s.Codecs.WriteError(w, req, err) }
		ctx := req.Context()
		if req.Method == http.MethodGet && kc.Authorizer != nil {
			// A WebSocket client connects with GET, which the filters authorized as "get";
			// like kube-apiserver, the command also needs "create" on the subresource.
			attrs := filters.AttributesFrom(req)
			attrs.Verb = "create"
			if d, reason, err := kc.Authorizer.Authorize(ctx, attrs); d != authz.DecisionAllow {
				if err != nil {
					fail(apierrors.NewInternalError(fmt.Errorf("authorizing the request: %w", err)))
					return
				}
				fail(filters.ForbiddenError(attrs, reason))
				return
			}
		}
		obj, err := s.Store.Get(ctx, r.Namespace, r.Name, nil)
		if err != nil {
			fail(err)
			return
		}
		pod := obj.(*corev1.Pod)
		loc, container, err := locate(pod, req.URL.Query())
		if err != nil {
			fail(err)
			return
		}
		u, err := kubeletURL(ctx, kc, pod, container, loc.Path)
		if err != nil {
			fail(err)
			return
		}
		u.RawQuery = loc.RawQuery
		// The client's credentials are for the API server, not the kubelet; the kubelet
		// sees the API server's client certificate.
		req.Header.Del("Authorization")
		h := proxy.NewUpgradeAwareHandler(u, transport, false, true, proxy.NewErrorResponder(streamErrorResponder{fail: fail, node: pod.Spec.NodeName}))
		h.ServeHTTP(w, req)
	}
}

// streamErrorResponder answers a failure to reach the kubelet.
type streamErrorResponder struct {
	fail func(error)
	node string
}

// Error implements proxy.SimpleErrorResponder.
func (r streamErrorResponder) Error(err error) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		// The proxy's own refusals, such as a request that is no upgrade.
		r.fail(err)
		return
	}
	r.fail(apierrors.NewInternalError(fmt.Errorf("reaching the kubelet on node %s: %w", r.node, err)))
}
