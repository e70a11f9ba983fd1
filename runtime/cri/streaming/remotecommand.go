// Package streaming is the server side of Kubernetes' remote command protocol for CRI
// runtimes: the URL a runtime's Exec answers points at a Server, which upgrades the
// kubelet-proxied connection to WebSocket (v5/v4.channel.k8s.io) or SPDY
// (v5/v4.channel.k8s.io), runs the command with the client's streams and reports its exit
// code on the error channel, as the kubelet's CRI streaming server does.
package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Options says which streams a command gets, from the request's input, output, error and
// tty query parameters (what the API server's PodExecOptions become on the kubelet URL).
type Options struct {
	Stdin, Stdout, Stderr, TTY bool
}

// Streams are a running command's standard streams; a nil stream was not requested.
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Resize carries terminal sizes when TTY is set; nil otherwise.
	Resize <-chan TerminalSize
}

// TerminalSize is a resize event as clients send it (JSON with these field names).
type TerminalSize struct {
	Width, Height uint16
}

// ExitError is a command's non-zero exit, reported to the client as its exit code
// (kubectl exec exits with it).
type ExitError struct{ Code int }

// Error implements error.
func (e *ExitError) Error() string {
	return fmt.Sprintf("command terminated with non-zero exit code: %d", e.Code)
}

// RunFunc runs a command with streams until it ends or ctx is done. An *ExitError is a
// non-zero exit; any other error is a failure to run it.
type RunFunc func(ctx context.Context, s Streams) error

// streamCreationTimeout bounds how long the client may take to open its SPDY streams, the
// kubelet's default.
const streamCreationTimeout = 30 * time.Second

// protocols are the remote command versions served, newest first. kubectl 1.37 offers
// v5 over WebSocket and v5…v1 over SPDY; v4 has the same framing and exit-status format.
var protocols = []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name}

// ServeCommand upgrades the connection and runs run with the client's streams. Errors
// before the upgrade are answered as Kubernetes Status errors.
func ServeCommand(w http.ResponseWriter, req *http.Request, opts Options, run RunFunc, log *slog.Logger) {
	if !opts.Stdin && !opts.Stdout && !opts.Stderr {
		WriteStatus(w, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr"))
		return
	}
	if opts.TTY && opts.Stderr {
		// A terminal merges stderr into stdout, as runc's does.
		opts.Stderr = false
	}
	open := openSPDY
	if wsstream.IsWebSocketRequest(req) {
		open = openWebSocket
	}
	s, err := open(w, req, opts)
	if err != nil {
		log.Debug("remote command upgrade failed", "err", err)
		return
	}
	s.run(req.Context(), run, log)
}

// session is an upgraded connection's streams.
type session struct {
	stdin          io.ReadCloser
	stdout, stderr io.Writer
	errStream      io.Writer
	resize         io.Reader
	// closed is done when the client's connection is gone (nil: not observable).
	closed <-chan bool
	close  func()
}

func (s *session) run(parent context.Context, run RunFunc, log *slog.Logger) {
	// A hijacked connection's end does not cancel the request context; the command ends
	// when the connection does or when a write to the client fails.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	// Closing the connection unblocks the resize reader before the wait.
	defer s.close()
	defer cancel()
	if s.closed != nil {
		wg.Go(func() {
			select {
			case <-s.closed:
				cancel()
			case <-ctx.Done():
			}
		})
	}
	st := Streams{}
	if s.stdin != nil {
		st.Stdin = s.stdin
	}
	if s.stdout != nil {
		st.Stdout = &cancelOnError{w: s.stdout, cancel: cancel}
	}
	if s.stderr != nil {
		st.Stderr = &cancelOnError{w: s.stderr, cancel: cancel}
	}
	if s.resize != nil {
		ch := make(chan TerminalSize, 1)
		st.Resize = ch
		wg.Go(func() {
			defer close(ch)
			dec := json.NewDecoder(s.resize)
			for {
				var size TerminalSize
				if err := dec.Decode(&size); err != nil {
					return
				}
				select {
				case ch <- size:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	err := run(ctx, st)
	var status *metav1.Status
	var exit *ExitError
	switch {
	case err == nil:
		status = &metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exit):
		status = &metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: err.Error(), Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(exit.Code)}}}}
	default:
		log.Debug("remote command failed", "err", err)
		status = &apierrors.NewInternalError(err).ErrStatus
	}
	status.Kind, status.APIVersion = "Status", "v1"
	b, _ := json.Marshal(status)
	if _, werr := s.errStream.Write(b); werr != nil {
		log.Debug("writing remote command status", "err", werr)
	}
	if c, ok := s.errStream.(io.Closer); ok {
		_ = c.Close() // the client reads the status to EOF
	}
}

// cancelOnError ends the command once the client can no longer be written to.
type cancelOnError struct {
	w      io.Writer
	cancel context.CancelFunc
}

func (c *cancelOnError) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.cancel()
	}
	return n, err
}

// WebSocket channels of the remote command protocol, by stream number.
func channels(opts Options) []wsstream.ChannelType {
	ch := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	return []wsstream.ChannelType{
		ch(opts.Stdin, wsstream.ReadChannel),
		ch(opts.Stdout, wsstream.WriteChannel),
		ch(opts.Stderr, wsstream.WriteChannel),
		wsstream.WriteChannel,
		ch(opts.TTY, wsstream.ReadChannel),
	}
}

func openWebSocket(w http.ResponseWriter, req *http.Request, opts Options) (*session, error) {
	cfg := map[string]wsstream.ChannelProtocolConfig{}
	for _, p := range protocols {
		cfg[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels(opts)}
	}
	conn := wsstream.NewConn(cfg)
	_, rwc, err := conn.Open(w, req)
	if err != nil {
		return nil, fmt.Errorf("opening websocket: %w", err)
	}
	s := &session{errStream: rwc[remotecommand.StreamErr], close: func() { _ = conn.Close() }}
	if opts.Stdin {
		s.stdin = rwc[remotecommand.StreamStdIn]
	}
	if opts.Stdout {
		s.stdout = rwc[remotecommand.StreamStdOut]
	}
	if opts.Stderr {
		s.stderr = rwc[remotecommand.StreamStdErr]
	}
	if opts.TTY {
		s.resize = rwc[remotecommand.StreamResize]
	}
	return s, nil
}

func openSPDY(w http.ResponseWriter, req *http.Request, opts Options) (*session, error) {
	if _, err := httpstream.Handshake(req, w, protocols); err != nil {
		// Handshake answered 403 with the supported protocols.
		return nil, fmt.Errorf("protocol handshake: %w", err)
	}
	type newStream struct {
		st        httpstream.Stream
		replySent <-chan struct{}
	}
	streams := make(chan newStream, 5)
	conn := spdy.NewResponseUpgraderWithPings(0).UpgradeResponse(w, req, func(st httpstream.Stream, replySent <-chan struct{}) error {
		streams <- newStream{st, replySent}
		return nil
	})
	if conn == nil {
		return nil, errors.New("SPDY upgrade failed")
	}
	conn.SetIdleTimeout(4 * time.Hour)
	s := &session{closed: conn.CloseChan(), close: func() { _ = conn.Close() }}
	want := 1 // the error stream
	for _, on := range []bool{opts.Stdin, opts.Stdout, opts.Stderr, opts.TTY} {
		if on {
			want++
		}
	}
	timeout := time.NewTimer(streamCreationTimeout)
	defer timeout.Stop()
	var replies []<-chan struct{}
	for got := 0; got < want; {
		select {
		case ns := <-streams:
			st := ns.st
			replies = append(replies, ns.replySent)
			got++
			switch st.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				s.errStream = st
			case corev1.StreamTypeStdin:
				s.stdin = st
			case corev1.StreamTypeStdout:
				s.stdout = st
			case corev1.StreamTypeStderr:
				s.stderr = st
			case corev1.StreamTypeResize:
				s.resize = st
			default:
				got--
				_ = st.Reset()
			}
		case <-timeout.C:
			_ = conn.Close()
			return nil, fmt.Errorf("timed out waiting for the client's streams (%d of %d)", got, want)
		case <-conn.CloseChan():
			return nil, errors.New("connection closed before the client's streams were created")
		}
	}
	if s.errStream == nil {
		_ = conn.Close()
		return nil, errors.New("the client opened no error stream")
	}
	// The client's CreateStream waits for each reply; closing the connection (a command
	// that ends at once) before a reply is sent would fail the client with "Stream reset".
	for _, r := range replies {
		select {
		case <-r:
		case <-timeout.C:
			_ = conn.Close()
			return nil, errors.New("timed out replying to the client's streams")
		case <-conn.CloseChan():
			return nil, errors.New("connection closed while replying to the client's streams")
		}
	}
	return s, nil
}

// WriteStatus answers a failure before an upgrade as a Kubernetes Status (JSON), which
// both the WebSocket and the SPDY clients decode; errors that are no API status are 500s.
func WriteStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	status := apierrors.NewInternalError(err).ErrStatus
	if errors.As(err, &se) {
		status = se.Status()
	}
	status.Kind, status.APIVersion = "Status", "v1"
	b, _ := json.Marshal(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(b)
}
