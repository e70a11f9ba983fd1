package wasi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmplane/wasmplane/plugins/wasm"
	"github.com/wasmplane/wasmplane/runtime/cri/crilog"
)

// Exit codes this runtime reports where a Linux runtime would report a signal.
const (
	exitKilled          = 137 // 128+SIGKILL: StopContainer, or an out-of-memory kill
	exitTrap            = 134 // 128+SIGABRT: the guest trapped (unreachable, bad memory access, …)
	exitRuntimeRestarts = 255 // the runtime went away while the guest ran
)

// compiledModule is an image's module compiled once and shared by all its containers.
type compiledModule struct {
	once sync.Once
	mod  wazero.CompiledModule
	err  error
}

// compile returns the compiled module of image id, compiling it on first use. The on-disk
// compilation cache makes this cheap across runtime restarts too.
func (s *Server) compile(id string) (wazero.CompiledModule, error) {
	s.compileMu.Lock()
	e, ok := s.compiled[id]
	if !ok {
		e = &compiledModule{}
		s.compiled[id] = e
	}
	s.compileMu.Unlock()
	e.once.Do(func() {
		b, err := s.images.Read(id)
		if err != nil {
			e.err = err
			return
		}
		start := time.Now()
		// Fuel checks make a spinning guest come back into Go by itself (checkpoint in
		// serve): wazero's own checks are only at loop headers, and a guest that
		// recurses without looping would hold its thread, starve the server and outlive
		// StopContainer.
		if b, e.err = wasm.Instrument(b); e.err != nil {
			e.err = fmt.Errorf("instrument: %w", e.err)
			return
		}
		// The server context, not the request's: the result is shared by later callers.
		e.mod, e.err = s.rt.CompileModule(s.ctx, b)
		if e.err == nil {
			s.log.Info("compiled module", "image", id, "took", time.Since(start))
		}
	})
	if e.err != nil {
		s.compileMu.Lock()
		if s.compiled[id] == e {
			delete(s.compiled, id) // let a later call retry
		}
		s.compileMu.Unlock()
		return nil, fmt.Errorf("compile %s: %w", id, e.err)
	}
	return e.mod, nil
}

// forgetCompiled drops the compiled module of a removed image. Running instances keep
// working (wazero allows closing a compiled module with live instances).
func (s *Server) forgetCompiled(id string) {
	s.compileMu.Lock()
	e, ok := s.compiled[id]
	delete(s.compiled, id)
	s.compileMu.Unlock()
	if ok && e.mod != nil {
		_ = e.mod.Close(context.Background())
	}
}

func argv(rec *containerRecord) []string {
	var a []string
	if len(rec.Command) > 0 {
		a = append(a, rec.Command...)
	} else {
		a = append(a, rec.Image)
	}
	return append(a, rec.Args...)
}

// oomError marks a start that failed because the module's initial memory exceeds the limit.
type oomError struct{ limit uint64 }

// Error implements error.
func (e *oomError) Error() string {
	return fmt.Sprintf("the module's initial memory exceeds the memory limit of %d bytes", e.limit)
}

// guestSpec is what one instance runs with.
type guestSpec struct {
	rec    *containerRecord
	argv   []string
	stdin  io.Reader // nil: reads see EOF
	stdout io.Writer
	stderr io.Writer
	mem    *memoryLimiter
}

// prepareFS builds the guest's filesystem: the container's scratch directory as "/", each
// CRI directory mount as a preopen at its container path, and each file mount (the kubelet
// mounts /etc/hosts and /dev/termination-log) linked into the scratch directory, because
// WASI preopens are directories only.
func (s *Server) prepareFS(rec *containerRecord) (wazero.FSConfig, error) {
	scratch := s.scratchDir(rec.ID)
	fsc := wazero.NewFSConfig().WithDirMount(scratch, "/")
	if rec.ReadonlyRoot {
		fsc = readOnlyMount(wazero.NewFSConfig(), scratch, "/")
	}
	for _, m := range rec.Mounts {
		cpath := path.Clean("/" + m.ContainerPath)
		fi, err := os.Stat(m.HostPath)
		if errors.Is(err, os.ErrNotExist) {
			// As Docker does for bind mounts of a missing source: create a directory.
			if err := os.MkdirAll(m.HostPath, 0o755); err != nil {
				return nil, fmt.Errorf("create mount source %s: %w", m.HostPath, err)
			}
			fi, err = os.Stat(m.HostPath)
		}
		if err != nil {
			return nil, fmt.Errorf("mount source %s: %w", m.HostPath, err)
		}
		if fi.IsDir() {
			if cpath == "/" {
				return nil, fmt.Errorf("mounting over / is not supported (the scratch directory is /)")
			}
			if m.Readonly {
				fsc = readOnlyMount(fsc, m.HostPath, cpath)
			} else {
				fsc = fsc.WithDirMount(m.HostPath, cpath)
			}
			continue
		}
		dst := filepath.Join(scratch, filepath.FromSlash(cpath))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, fmt.Errorf("prepare file mount %s: %w", cpath, err)
		}
		_ = os.Remove(dst)
		// A hard link shares the host file (writes reach it, as the kubelet expects for the
		// termination log); read-only mounts and cross-device sources get a copy.
		if m.Readonly || os.Link(m.HostPath, dst) != nil {
			if err := copyFile(m.HostPath, dst); err != nil {
				return nil, fmt.Errorf("prepare file mount %s: %w", cpath, err)
			}
		}
	}
	if rec.WorkingDir != "" {
		if err := os.MkdirAll(filepath.Join(scratch, filepath.FromSlash(path.Clean("/"+rec.WorkingDir))), 0o755); err != nil {
			return nil, fmt.Errorf("create working dir: %w", err)
		}
	}
	return fsc, nil
}

// writeEtcFiles writes /etc/hostname and /etc/resolv.conf (from the sandbox's DNS config)
// into the scratch directory, as container runtimes do: WASI has no gethostname or resolver
// configuration of its own, so programs read these files (or $HOSTNAME).
func (s *Server) writeEtcFiles(id string, sb *sandboxRecord) error {
	etc := filepath.Join(s.scratchDir(id), "etc")
	if sb.Hostname == "" && len(sb.DNSServers)+len(sb.DNSSearches)+len(sb.DNSOptions) == 0 {
		return nil
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	if sb.Hostname != "" {
		if err := os.WriteFile(filepath.Join(etc, "hostname"), []byte(sb.Hostname+"\n"), 0o644); err != nil {
			return err
		}
	}
	if len(sb.DNSServers)+len(sb.DNSSearches)+len(sb.DNSOptions) > 0 {
		var b strings.Builder
		for _, ns := range sb.DNSServers {
			fmt.Fprintf(&b, "nameserver %s\n", ns)
		}
		if len(sb.DNSSearches) > 0 {
			fmt.Fprintf(&b, "search %s\n", strings.Join(sb.DNSSearches, " "))
		}
		if len(sb.DNSOptions) > 0 {
			fmt.Fprintf(&b, "options %s\n", strings.Join(sb.DNSOptions, " "))
		}
		if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyMount mounts host dir read-only at guest path. It is wazero's read-only FS,
// except that opening a file for writing fails with EROFS ("Read-only file system") as on
// Linux, instead of ENOSYS ("not implemented"), so guests report the real reason.
func readOnlyMount(fsc wazero.FSConfig, dir, guestPath string) wazero.FSConfig {
	return fsc.(sysfs.FSConfig).WithSysFSMount(&readOnlyFS{ReadFS: &sysfs.ReadFS{FS: sysfs.DirFS(dir)}}, guestPath)
}

type readOnlyFS struct{ *sysfs.ReadFS }

// OpenFile implements experimentalsys.FS.
func (r *readOnlyFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	f, errno := r.ReadFS.OpenFile(path, flag, perm)
	if errno == experimentalsys.ENOSYS && flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 {
		errno = experimentalsys.EROFS
	}
	return f, errno
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// instantiate creates (but does not start) a guest instance. The caller runs _start.
func (s *Server) instantiate(ctx context.Context, g guestSpec) (api.Module, error) {
	compiled, err := s.compile(imageIDOf(g.rec.ImageRef))
	if err != nil {
		return nil, err
	}
	fsc, err := s.prepareFS(g.rec)
	if err != nil {
		return nil, err
	}
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one module at once
		WithArgs(g.argv...).
		WithStdout(g.stdout).
		WithStderr(g.stderr).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		// Sleeps end when the container is stopped, so a guest idling in poll_oneoff (a Go
		// program in time.Sleep) is killed at once instead of at its next wake-up.
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}).
		WithRandSource(rand.Reader).
		WithStartFunctions() // _start is called by the runner, after we hold the module
	if g.stdin != nil {
		mc = mc.WithStdin(g.stdin)
	}
	hasPWD := false
	for _, kv := range g.rec.Envs {
		mc = mc.WithEnv(kv[0], kv[1])
		hasPWD = hasPWD || kv[0] == "PWD"
	}
	// Go's wasip1 port (and wasi-libc) take the working directory from $PWD.
	if g.rec.WorkingDir != "" && !hasPWD {
		mc = mc.WithEnv("PWD", path.Clean("/"+g.rec.WorkingDir))
	}
	mod, err := s.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, g.mem), compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	if g.mem.denied.Load() {
		_ = mod.Close(context.Background())
		return nil, &oomError{limit: g.mem.limit.Load()}
	}
	if mod.ExportedFunction("_start") == nil {
		_ = mod.Close(context.Background())
		return nil, errors.New("the module exports no _start function (not a WASI command)")
	}
	return mod, nil
}

// exitResult is how a guest ended.
type exitResult struct {
	code    int32
	reason  string
	message string
}

// classify turns the error of _start into a CRI exit code and reason.
func classify(err error, killed bool, mem *memoryLimiter) exitResult {
	var code int32
	var msg string
	var exitErr *sys.ExitError
	switch {
	case err == nil:
		code = 0
	case killed:
		return exitResult{code: exitKilled, reason: "Error", message: "killed by StopContainer (WASI has no signals: the guest is stopped at once)"}
	case errors.As(err, &exitErr):
		switch exitErr.ExitCode() {
		case sys.ExitCodeContextCanceled, sys.ExitCodeDeadlineExceeded:
			return exitResult{code: exitRuntimeRestarts, reason: "RuntimeRestarted", message: "the runtime shut down while the container was running"}
		}
		code = int32(exitErr.ExitCode())
	default:
		code = exitTrap
		msg = "the guest trapped: " + firstLine(err.Error())
	}
	if code != 0 && mem.denied.Load() {
		return exitResult{code: exitKilled, reason: "OOMKilled", message: fmt.Sprintf("memory limit of %d bytes reached (guest exit code %d)", mem.limit.Load(), code)}
	}
	if code == 0 {
		return exitResult{code: 0, reason: "Completed"}
	}
	return exitResult{code: code, reason: "Error", message: msg}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// guest is an instantiated container module that has not started yet.
type guest struct {
	rec        containerRecord
	mod        api.Module
	ctx        context.Context
	p          *proc
	outW, errW *crilog.Writer
}

// discard releases a guest that will not run.
func (g *guest) discard() {
	_ = g.mod.Close(context.Background())
	g.p.mem.release()
	g.p.cancel()
	_ = g.p.log.Close()
}

// prepareGuest opens the container's log, writes its /etc files and instantiates its
// module. It takes no lock: rec and sb are snapshots.
func (s *Server) prepareGuest(rec containerRecord, sb sandboxRecord) (*guest, error) {
	logPath := ""
	if sb.LogDirectory != "" && rec.LogPath != "" {
		logPath = filepath.Join(sb.LogDirectory, rec.LogPath)
	}
	lf, err := crilog.Open(logPath)
	if err != nil {
		return nil, err
	}
	if err := s.writeEtcFiles(rec.ID, &sb); err != nil {
		_ = lf.Close()
		return nil, fmt.Errorf("prepare /etc files: %w", err)
	}
	rec.Envs = slices.Clone(rec.Envs)
	if !hasEnv(rec.Envs, "HOSTNAME") && sb.Hostname != "" {
		rec.Envs = append(rec.Envs, [2]string{"HOSTNAME", sb.Hostname})
	}
	ctx, cancel := context.WithCancel(s.ctx)
	hub, stdin := newAttachHub(rec.Stdin, rec.StdinOnce)
	// A guest blocked reading stdin is not interrupted by the context: closing the pipe is
	// what ends the read when the guest is killed or has exited.
	context.AfterFunc(ctx, hub.close)
	g := &guest{
		rec:  rec,
		ctx:  ctx,
		outW: lf.Writer(crilog.Stdout),
		errW: lf.Writer(crilog.Stderr),
		p:    &proc{cancel: cancel, done: make(chan struct{}), mem: newMemoryLimiter(rec.MemoryLimit), log: lf, attach: hub},
	}
	g.mod, err = s.instantiate(ctx, guestSpec{rec: &g.rec, argv: argv(&g.rec), stdin: stdin,
		stdout: hub.output(g.outW, false), stderr: hub.output(g.errW, true), mem: g.p.mem})
	if err != nil {
		g.p.mem.release()
		cancel()
		_ = lf.Close()
		return nil, err
	}
	return g, nil
}

// runGuestLocked runs the guest's _start in a goroutine that records the exit. s.mu must
// be held and the server not closed (so s.wg.Add cannot race Close's Wait).
func (s *Server) runGuestLocked(c *container, g *guest) *proc {
	p := g.p
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(p.done)
		defer p.cancel()
		// The thread stays locked until the goroutine ends (and the thread with it), so
		// its CPU clock counts this guest alone.
		runtime.LockOSThread()
		p.cpu.start()
		t := s.gate.newTurn()
		_, err := g.mod.ExportedFunction("_start").Call(withTurn(g.ctx, t))
		t.leave()
		p.cpu.stop()
		res := classify(err, p.killed.Load(), p.mem)
		_ = g.mod.Close(context.Background())
		// _start has returned: no guest code runs, so the memory can be unmapped.
		p.mem.release()
		if ferr := errors.Join(g.outW.Flush(), g.errW.Flush()); ferr != nil {
			s.log.Warn("flush container log", "id", g.rec.ID, "err", ferr)
		}
		s.mu.Lock()
		// When the runtime itself is closing, the exit is left unrecorded on disk so the
		// next start reports it like a crash (255, RuntimeRestarted).
		s.finishLocked(c, res, res.reason != "RuntimeRestarted")
		s.mu.Unlock()
		if err := p.log.Close(); err != nil {
			s.log.Warn("close container log", "id", g.rec.ID, "err", err)
		}
		s.log.Debug("container exited", "id", g.rec.ID, "code", res.code, "reason", res.reason)
	}()
	return p
}

func hasEnv(envs [][2]string, k string) bool {
	for _, kv := range envs {
		if kv[0] == k {
			return true
		}
	}
	return false
}

// cappedBuffer keeps the first max bytes written and discards the rest, as the CRI asks of
// ExecSync output (16 MiB).
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

// Write implements io.Writer; it never fails, so the guest never sees a short write.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Bytes returns a copy of what was kept.
func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// execSync runs cmd as a new instance of the container's module with the container's
// filesystem, environment and memory limit, and returns its output and exit code.
func (s *Server) execSync(ctx context.Context, rec containerRecord, cmd []string, timeout time.Duration) (stdout, stderr []byte, code int32, err error) {
	out := &cappedBuffer{max: 16 << 20}
	errb := &cappedBuffer{max: 16 << 20}
	code, err = s.runExec(ctx, rec, guestSpec{argv: cmd, stdout: out, stderr: errb}, timeout)
	return out.Bytes(), errb.Bytes(), code, err
}

// runExec runs g (argv and streams set) as a new instance of rec's module, with the
// container's filesystem, environment and memory limit, and returns its exit code.
func (s *Server) runExec(ctx context.Context, rec containerRecord, g guestSpec, timeout time.Duration) (code int32, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Stop the exec when the runtime closes, too.
	stopAfter := context.AfterFunc(s.ctx, cancel)
	defer stopAfter()
	var timedOut atomic.Bool
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
		defer t.Stop()
	}
	if g.stdout == nil {
		g.stdout = io.Discard
	}
	if g.stderr == nil {
		g.stderr = io.Discard
	}
	g.rec, g.mem = &rec, newMemoryLimiter(rec.MemoryLimit)
	mod, err := s.instantiate(ctx, g)
	if err != nil {
		g.mem.release()
		return 0, err
	}
	defer func() {
		_ = mod.Close(context.Background())
		g.mem.release()
	}()
	t := s.gate.newTurn()
	_, cerr := mod.ExportedFunction("_start").Call(withTurn(ctx, t))
	t.leave()
	if timedOut.Load() {
		return 0, errExecTimeout
	}
	if ctx.Err() != nil && cerr != nil {
		return 0, fmt.Errorf("exec cancelled: %w", ctx.Err())
	}
	return classify(cerr, false, g.mem).code, nil
}

var errExecTimeout = errors.New("command timed out")
