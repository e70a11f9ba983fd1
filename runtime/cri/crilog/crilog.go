// Package crilog writes container output in the CRI log format that the kubelet,
// `kubectl logs` and `crictl logs` read:
//
//	2016-10-06T00:17:09.669794202Z stdout F message
//
// one record per line; a line longer than MaxLineSize is split into records tagged P
// (partial) followed by a final record tagged F.
package crilog

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MaxLineSize is the longest record payload; longer lines are split into partial records
// so one runaway line cannot hold unbounded memory (containerd uses the same 16 KiB).
const MaxLineSize = 16 * 1024

// Stream names used in the log format.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// File is a CRI log file shared by a container's stdout and stderr writers. It is safe for
// concurrent use; records are written whole, so two streams never interleave inside one.
type File struct {
	mu   sync.Mutex
	path string
	f    *os.File // nil when discarding (no path)
	now  func() time.Time
}

// Open opens (creating parents and the file, appending) the CRI log at path. An empty path
// yields a File that discards everything, for containers without a log path.
func Open(path string) (*File, error) {
	lf := &File{path: path, now: time.Now}
	if path == "" {
		return lf, nil
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	lf.f = f
	return lf, nil
}

func openAppend(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("crilog: create log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("crilog: open %s: %w", path, err)
	}
	return f, nil
}

// Path returns the file's path ("" when discarding).
func (l *File) Path() string { return l.path }

// Reopen closes and reopens the file at the same path, for log rotation: the kubelet
// renames the file and then asks the runtime to reopen it.
func (l *File) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.path == "" {
		return nil
	}
	f, err := openAppend(l.path)
	if err != nil {
		return err
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	l.f = f
	return nil
}

// Close closes the file. Writers must be flushed first.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("crilog: close %s: %w", l.path, err)
	}
	return nil
}

// record writes one record; tag is 'F' or 'P'.
func (l *File) record(stream string, tag byte, msg []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	ts := l.now().UTC().Format(time.RFC3339Nano)
	buf := make([]byte, 0, len(ts)+len(stream)+len(msg)+5)
	buf = append(buf, ts...)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ', tag, ' ')
	buf = append(buf, msg...)
	buf = append(buf, '\n')
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("crilog: write %s: %w", l.path, err)
	}
	return nil
}

// Writer returns a line-buffering writer for one stream of this file. Call Flush on it when
// the stream ends so a last line without a newline is written.
func (l *File) Writer(stream string) *Writer {
	return &Writer{file: l, stream: stream}
}

// Writer turns a byte stream into CRI log records. It is safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	file   *File
	stream string
	buf    []byte
	tap    func([]byte)
}

var _ io.Writer = (*Writer)(nil)

// SetTap registers f to see every complete payload written (used to spot out-of-memory
// messages on stderr); f must not retain the slice.
func (w *Writer) SetTap(f func([]byte)) {
	w.mu.Lock()
	w.tap = f
	w.mu.Unlock()
}

// Write buffers p and emits one F record per complete line and P records for lines longer
// than MaxLineSize. It never fails because of the guest's output; only file errors surface.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.buf[:i]
		if err := w.emit(line, true); err != nil {
			return len(p), err
		}
		w.buf = w.buf[i+1:]
	}
	for len(w.buf) >= MaxLineSize {
		if err := w.emit(w.buf[:MaxLineSize], false); err != nil {
			return len(p), err
		}
		w.buf = w.buf[MaxLineSize:]
	}
	// Compact so a long-running writer does not keep the whole history's backing array.
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// emit writes a line, splitting it into partial records when it is too long.
func (w *Writer) emit(line []byte, full bool) error {
	if w.tap != nil {
		w.tap(line)
	}
	for len(line) > MaxLineSize {
		if err := w.file.record(w.stream, 'P', line[:MaxLineSize]); err != nil {
			return err
		}
		line = line[MaxLineSize:]
	}
	tag := byte('F')
	if !full {
		tag = 'P'
	}
	return w.file.record(w.stream, tag, line)
}

// Flush writes any buffered text as a final F record, as containerd does for output that
// ends without a newline.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return nil
	}
	err := w.emit(w.buf, true)
	w.buf = nil
	return err
}
