package wasi

import (
	"context"
	"io"
	"sync"

	"github.com/wasmplane/wasmplane/runtime/cri/streaming"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// attachHub joins `kubectl attach` clients to a running guest: what the guest writes goes
// to its log and to every attached client; with stdin (the container's stdin flag), what
// clients send is the guest's stdin. Without a client the guest's reads wait, as a
// process's do on a container's open stdin.
type attachHub struct {
	mu      sync.Mutex
	clients map[*attachClient]struct{}
	// stdin is nil for a container without stdin (its guest reads EOF).
	stdin *io.PipeWriter
	// once closes stdin when the first feeding client's input ends (the stdinOnce flag).
	once bool
	// attached: a client has fed stdin.
	attached bool
}

type attachClient struct{ stdout, stderr io.Writer }

func newAttachHub(stdin, once bool) (*attachHub, io.Reader) {
	h := &attachHub{clients: map[*attachClient]struct{}{}, once: once}
	if !stdin {
		return h, nil
	}
	r, w := io.Pipe()
	h.stdin = w
	return h, r
}

// output is the guest's stdout (or stderr) writer: the log, then the clients.
func (h *attachHub) output(log io.Writer, stderr bool) io.Writer {
	return hubWriter{h: h, log: log, stderr: stderr}
}

type hubWriter struct {
	h      *attachHub
	log    io.Writer
	stderr bool
}

// Write implements io.Writer. A client that cannot be written to is dropped; the guest's
// write only fails if the log's does.
func (w hubWriter) Write(p []byte) (int, error) {
	n, err := w.log.Write(p)
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	for c := range w.h.clients {
		out := c.stdout
		if w.stderr {
			out = c.stderr
		}
		if out == nil {
			continue
		}
		if _, werr := out.Write(p); werr != nil {
			delete(w.h.clients, c)
		}
	}
	return n, err
}

// close ends the guest's stdin: the guest has exited or is being killed, so a read
// blocked on it must return.
func (h *attachHub) close() {
	if h.stdin != nil {
		_ = h.stdin.CloseWithError(io.EOF)
	}
}

// Attach implements the CRI: a URL on the streaming server where the client is joined
// to the running container's streams. WASI has no terminal, so a tty is refused as exec
// refuses it; `kubectl attach -i` (and `kubectl debug -i`) work.
func (s *Server) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := s.checkStream(req.GetContainerId(), req.GetTty(), "attach"); err != nil {
		return nil, err
	}
	return s.streams.GetAttach(req)
}

// Attach implements streaming.Runtime: the client gets the guest's output from now on
// and, if the container has stdin, feeds it, until the guest exits or the client goes.
func (r execRunner) Attach(ctx context.Context, containerID string, _ bool, st streaming.Streams) error {
	s := r.s
	c, err := s.lockRunning(containerID)
	if err != nil {
		return err
	}
	p := c.proc
	h := p.attach
	client := &attachClient{stdout: st.Stdout, stderr: st.Stderr}
	feeds := st.Stdin != nil && h.stdin != nil
	h.mu.Lock()
	h.clients[client] = struct{}{}
	// stdinOnce is about the first client that sends input, not one that only reads.
	first := feeds && !h.attached
	h.attached = h.attached || feeds
	h.mu.Unlock()
	if feeds {
		// The copy ends when the client's input does, which the session closes once this
		// returns; the server's wait group keeps Close waiting for it.
		s.wg.Go(func() {
			_, _ = io.Copy(h.stdin, st.Stdin)
			if h.once && first {
				_ = h.stdin.Close()
			}
		})
	}
	s.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.clients, client)
		h.mu.Unlock()
	}()
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	return nil
}
