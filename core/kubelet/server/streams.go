package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wasmplane/wasmplane/runtime/cri/streaming"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/proxy"
)

// StreamOptions are an exec's or attach's streams, from the input, output, error and tty
// query parameters the API server sets on the kubelet URL.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// Streamer asks the container runtime where an exec, attach or port-forward is served:
// the CRI answers each with a URL the kubelet proxies the client's upgraded connection to.
type Streamer interface {
	// ExecURL returns the runtime's URL running cmd in the pod's container.
	ExecURL(ctx context.Context, namespace, pod, container string, cmd []string, opts StreamOptions) (*url.URL, error)
	// AttachURL returns the runtime's URL attaching to the pod's running container.
	AttachURL(ctx context.Context, namespace, pod, container string, opts StreamOptions) (*url.URL, error)
	// PortForwardURL returns the runtime's URL forwarding to ports of the pod's sandbox.
	PortForwardURL(ctx context.Context, namespace, pod string, ports []int32) (*url.URL, error)
}

// queryFlag reads a boolean stream parameter as the kubelet does ("1"), also taking "true".
func queryFlag(q url.Values, k string) bool {
	v := q.Get(k)
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

func streamOptions(q url.Values) (StreamOptions, error) {
	o := StreamOptions{Stdin: queryFlag(q, "input"), Stdout: queryFlag(q, "output"), Stderr: queryFlag(q, "error"), TTY: queryFlag(q, "tty")}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, BadRequest("you must specify at least 1 of stdin, stdout, stderr")
	}
	if o.TTY && o.Stderr {
		// A terminal carries stderr on stdout.
		o.Stderr = false
	}
	return o, nil
}

// registerStreams adds /exec, /attach and /portForward; each proxies the client's
// upgraded connection to the URL the runtime gives.
func registerStreams(mux *http.ServeMux, st Streamer, log *slog.Logger, acc Access) {
	guard := func(what string, h func(w http.ResponseWriter, req *http.Request) (*url.URL, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if err := acc.check(req, what); err != nil {
				writeStreamErr(w, err)
				return
			}
			u, err := h(w, req)
			if err != nil {
				writeStreamErr(w, err)
				return
			}
			// The runtime's server is on this host; nothing is added to the location's path.
			p := proxy.NewUpgradeAwareHandler(u, nil, false, true, proxy.NewErrorResponder(errorResponder{w: w, log: log}))
			p.ServeHTTP(w, req)
		}
	}
	exec := guard("exec in containers", func(w http.ResponseWriter, req *http.Request) (*url.URL, error) {
		q := req.URL.Query()
		opts, err := streamOptions(q)
		if err != nil {
			return nil, err
		}
		cmd := q["command"]
		if len(cmd) == 0 {
			return nil, BadRequest("you must specify at least one command for the container")
		}
		return st.ExecURL(req.Context(), req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container"), cmd, opts)
	})
	attach := guard("attach to containers", func(w http.ResponseWriter, req *http.Request) (*url.URL, error) {
		opts, err := streamOptions(req.URL.Query())
		if err != nil {
			return nil, err
		}
		return st.AttachURL(req.Context(), req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container"), opts)
	})
	portForward := guard("port-forward to pods", func(w http.ResponseWriter, req *http.Request) (*url.URL, error) {
		var ports []int32
		for _, v := range req.URL.Query()["port"] {
			p, err := strconv.ParseUint(v, 10, 16)
			if err != nil || p == 0 {
				return nil, BadRequest("invalid port %q", v)
			}
			ports = append(ports, int32(p))
		}
		return st.PortForwardURL(req.Context(), req.PathValue("namespace"), req.PathValue("pod"), ports)
	})
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", portForward)
	}
}

// errorResponder answers a failure to reach the runtime's streaming server.
type errorResponder struct {
	w   http.ResponseWriter
	log *slog.Logger
}

// Error implements proxy.SimpleErrorResponder.
func (r errorResponder) Error(err error) {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		// The proxy's own refusals, such as a request that is no upgrade.
		streaming.WriteStatus(r.w, err)
		return
	}
	r.log.Warn("proxying to the runtime's streaming server", "err", err)
	writeStreamErr(r.w, fmt.Errorf("reaching the container runtime's streaming server: %w", err))
}

// writeStreamErr answers as a Kubernetes Status: the API server passes the kubelet's
// answer to a failed upgrade through, and clients decode a Status (a WebSocket client
// would read plain text such as "runtime: message" as an empty YAML Status).
func writeStreamErr(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		streaming.WriteStatus(w, err)
		return
	}
	reason := metav1.StatusReasonInternalError
	switch e.Code {
	case http.StatusBadRequest:
		reason = metav1.StatusReasonBadRequest
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	case http.StatusForbidden:
		reason = metav1.StatusReasonForbidden
	case http.StatusTooManyRequests:
		reason = metav1.StatusReasonTooManyRequests
	}
	streaming.WriteStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(e.Code), Reason: reason, Message: e.Message}})
}
