package resources

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/authz"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletConnection is how pods/log reaches the kubelet of a pod's node.
type KubeletConnection struct {
	// TLS is the client configuration for kubelets' HTTPS servers. nil = do not verify
	// the kubelet's serving certificate and present no client certificate — the same as
	// kube-apiserver without --kubelet-certificate-authority; set it to verify kubelets.
	TLS *tls.Config
	// GetNode reads a Node; nil = pods/log cannot reach kubelets.
	GetNode func(ctx context.Context, name string) (*corev1.Node, error)
	// Authorizer checks the extra "create" a WebSocket (GET) exec, attach or port-forward
	// needs; nil = the filters' "get" decision stands.
	Authorizer authz.Authorizer
}

// WithKubeletConnection makes the pods definition's pods/log proxy to kubelets through kc,
// and adds pods/exec, pods/attach and pods/portforward, which proxy upgraded connections.
func WithKubeletConnection(defs []Definition, kc KubeletConnection) []Definition {
	for i := range defs {
		if defs[i].Resource.Name != "pods" || defs[i].Subresources == nil {
			continue
		}
		inner := defs[i].Subresources
		defs[i].Subresources = func(s *endpoints.Scope) []endpoints.Subresource {
			subs := inner(s)
			for j := range subs {
				if subs[j].Name == "log" {
					subs[j].Handlers = map[string]endpoints.HandlerFunc{http.MethodGet: podLogHandler(s, kc)}
				}
			}
			for _, name := range []string{"attach", "exec", "portforward"} {
				h := podStreamHandler(s, kc, name)
				subs = append(subs, endpoints.Subresource{Name: name, Handlers: map[string]endpoints.HandlerFunc{http.MethodGet: h, http.MethodPost: h}})
			}
			return subs
		}
	}
	return defs
}

// logQueryParams are the PodLogOptions the kubelet understands, passed through.
var logQueryParams = []string{"follow", "previous", "tailLines", "timestamps", "sinceSeconds", "sinceTime", "limitBytes"}

// KubeletTransport is the transport to kubelets' HTTPS servers with cfg (nil: the
// documented default, see KubeletConnection.TLS).
func KubeletTransport(cfg *tls.Config) *http.Transport {
	if cfg == nil {
		cfg = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // documented default, like kube-apiserver's
	}
	return &http.Transport{TLSClientConfig: cfg, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
}

// nodeAddress picks the kubelet's host: InternalIP, else Hostname, else the node name.
func nodeAddress(n *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return n.Name
}

func statusError(code int, msg string) error {
	if code == http.StatusBadRequest {
		return apierrors.NewBadRequest(msg)
	}
	reason := metav1.StatusReasonInternalError
	switch code {
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusForbidden:
		reason = metav1.StatusReasonForbidden
	case http.StatusUnauthorized:
		reason = metav1.StatusReasonUnauthorized
	case http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg}}
}

// podLogHandler serves pods/log by streaming from the kubelet of the pod's node.
func podLogHandler(s *endpoints.Scope, kc KubeletConnection) endpoints.HandlerFunc {
	client := &http.Client{Transport: KubeletTransport(kc.TLS)}
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		fail := func(err error) { s.Codecs.WriteError(w, req, err) }
		ctx := req.Context()
		obj, err := s.Store.Get(ctx, r.Namespace, r.Name, nil)
		if err != nil {
			fail(err)
			return
		}
		pod := obj.(*corev1.Pod)
		q := req.URL.Query()
		container, err := podContainer(pod, q.Get("container"))
		if err != nil {
			fail(err)
			return
		}
		for _, k := range []string{"tailLines", "sinceSeconds", "limitBytes"} {
			if v := q.Get(k); v != "" {
				if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || (k != "tailLines" && n == 0) {
					fail(apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q", k, v)))
					return
				}
			}
		}
		u, err := kubeletURL(ctx, kc, pod, container, "/containerLogs/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name)+"/"+url.PathEscape(container))
		if err != nil {
			fail(err)
			return
		}
		fwd := url.Values{}
		for _, k := range logQueryParams {
			if v := q.Get(k); v != "" {
				fwd.Set(k, v)
			}
		}
		u.RawQuery = fwd.Encode()
		kreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			fail(apierrors.NewInternalError(err))
			return
		}
		resp, err := client.Do(kreq)
		if err != nil {
			fail(apierrors.NewInternalError(fmt.Errorf("reaching the kubelet on node %s: %w", pod.Spec.NodeName, err)))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			fail(statusError(resp.StatusCode, strings.TrimSpace(string(b))))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, rerr := resp.Body.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return
				}
				if fl != nil {
					fl.Flush()
				}
			}
			if rerr != nil {
				return
			}
		}
	}
}

// podContainer is the container a pods/log, exec or attach request names, defaulted and
// checked as kube-apiserver does.
func podContainer(pod *corev1.Pod, container string) (string, error) {
	if container != "" {
		if !podHasContainer(pod, container) {
			return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
		}
		return container, nil
	}
	if len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name, nil
	}
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " "))
	if len(pod.Spec.InitContainers) > 0 {
		inits := make([]string, 0, len(pod.Spec.InitContainers))
		for _, c := range pod.Spec.InitContainers {
			inits = append(inits, c.Name)
		}
		msg += fmt.Sprintf(" or one of the init containers: [%s]", strings.Join(inits, " "))
	}
	return "", apierrors.NewBadRequest(msg)
}

// kubeletURL is the https URL of path on the kubelet of pod's node.
func kubeletURL(ctx context.Context, kc KubeletConnection, pod *corev1.Pod, container, path string) (*url.URL, error) {
	if pod.Spec.NodeName == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	if kc.GetNode == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: ContainerCreating", container, pod.Name))
	}
	node, err := kc.GetNode(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	return KubeletURL(node, path)
}

// KubeletURL is the https URL of path on node's kubelet: the node's address and the
// port it reports in daemonEndpoints.
func KubeletURL(node *corev1.Node, path string) (*url.URL, error) {
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port == 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("node %s reports no kubelet port", node.Name))
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(nodeAddress(node), strconv.Itoa(int(port))), Path: path}, nil
}

func podHasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
