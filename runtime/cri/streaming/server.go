package streaming

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime runs exec commands and attach sessions for a Server.
type Runtime interface {
	// Exec runs cmd in the container with the streams until it ends or ctx is done; a
	// non-zero exit is an *ExitError.
	Exec(ctx context.Context, containerID string, cmd []string, tty bool, s Streams) error
	// Attach connects the streams to the running container's own until it exits or ctx
	// is done.
	Attach(ctx context.Context, containerID string, tty bool, s Streams) error
}

// tokenTTL is how long a URL from GetExec stays valid, the kubelet's streaming server's
// default: the kubelet follows it at once.
const tokenTTL = 30 * time.Second

// maxPending bounds unused tokens so a caller looping on Exec cannot grow the cache.
const maxPending = 1000

// Server hands out single-use exec URLs and serves them.
type Server struct {
	rt      Runtime
	baseURL url.URL
	log     *slog.Logger

	mu      sync.Mutex
	pending map[string]pendingExec
}

// pendingExec is an exec, or an attach (no command), waiting for its client.
type pendingExec struct {
	req     *runtimeapi.ExecRequest
	attach  bool
	expires time.Time
}

// NewServer returns a Server whose URLs start with baseURL (http://host:port of the
// listener Serve is given).
func NewServer(rt Runtime, baseURL url.URL, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{rt: rt, baseURL: baseURL, log: log, pending: map[string]pendingExec{}}
}

// GetExec validates req and returns the URL the client upgrades to run it.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if req.GetContainerId() == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required container_id")
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec command is empty")
	}
	u, err := s.pend(req, false)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// GetAttach validates req and returns the URL the client upgrades to attach.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if req.GetContainerId() == "" {
		return nil, status.Error(codes.InvalidArgument, "missing required container_id")
	}
	u, err := s.pend(&runtimeapi.ExecRequest{ContainerId: req.GetContainerId(), Tty: req.GetTty(),
		Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr()}, true)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// pend checks the streams of an exec or attach and keeps it under a new single-use
// token until its client comes.
func (s *Server) pend(req *runtimeapi.ExecRequest, attach bool) (string, error) {
	if req.GetTty() && req.GetStderr() {
		// CRI: stderr must be false with a tty, its output arrives on stdout.
		return "", status.Error(codes.InvalidArgument, "tty and stderr cannot both be true")
	}
	if !req.GetStdin() && !req.GetStdout() && !req.GetStderr() {
		return "", status.Error(codes.InvalidArgument, "one of stdin, stdout, or stderr must be set")
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", status.Errorf(codes.Internal, "generating exec token: %v", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	s.mu.Lock()
	for t, p := range s.pending {
		if now.After(p.expires) {
			delete(s.pending, t)
		}
	}
	if len(s.pending) >= maxPending {
		s.mu.Unlock()
		return "", status.Error(codes.ResourceExhausted, "too many pending exec requests")
	}
	s.pending[token] = pendingExec{req: req, attach: attach, expires: now.Add(tokenTTL)}
	s.mu.Unlock()
	u := s.baseURL
	u.Path = "/exec/" + token
	if attach {
		u.Path = "/attach/" + token
	}
	return u.String(), nil
}

func (s *Server) take(token string, attach bool) (*runtimeapi.ExecRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[token]
	if !ok || p.attach != attach {
		return nil, false
	}
	delete(s.pending, token)
	if time.Now().After(p.expires) {
		return nil, false
	}
	return p.req, true
}

// Handler serves the URLs GetExec and GetAttach return.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, kind := range []string{"exec", "attach"} {
		mux.HandleFunc("/"+kind+"/{token}", func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodGet && req.Method != http.MethodPost {
				WriteStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: kind}, req.Method))
				return
			}
			er, ok := s.take(req.PathValue("token"), kind == "attach")
			if !ok {
				WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: kind}, "token"))
				return
			}
			opts := Options{Stdin: er.GetStdin(), Stdout: er.GetStdout(), Stderr: er.GetStderr(), TTY: er.GetTty()}
			ServeCommand(w, req, opts, func(ctx context.Context, st Streams) error {
				if kind == "attach" {
					return s.rt.Attach(ctx, er.GetContainerId(), er.GetTty(), st)
				}
				return s.rt.Exec(ctx, er.GetContainerId(), er.GetCmd(), er.GetTty(), st)
			}, s.log)
		})
	}
	return mux
}

// Serve serves Handler on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		// Upgraded connections are hijacked and outlive requests; cancelling the base
		// context ends the commands they run.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		_ = hs.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("streaming server: %w", err)
	}
}
