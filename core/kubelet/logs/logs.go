// Package logs reads the CRI log files containers write (one "<RFC3339Nano> <stream>
// <P|F> <content>" record per line) back into the plain text `kubectl logs` shows, with
// Kubernetes' options: tail, timestamps, since, byte limit and follow.
package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Options are the pods/log query parameters the kubelet honours.
type Options struct {
	// TailLines, when >= 0, starts output that many log records before the end.
	TailLines int64
	// Timestamps prefixes each record with its RFC3339Nano time.
	Timestamps bool
	// Since drops records older than this time (zero = keep all).
	Since time.Time
	// LimitBytes stops after this many bytes of output (0 = no limit).
	LimitBytes int64
	// Follow keeps reading as the file grows until alive reports false or ctx ends.
	Follow bool
	// PollInterval is how often a followed file is checked for new data (default 100 ms).
	PollInterval time.Duration
}

// Stream names as CRI writes them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Record is one parsed CRI log line.
type Record struct {
	// Time is when the runtime received the bytes.
	Time time.Time
	// Stream is stdout or stderr.
	Stream string
	// Partial is true for a "P" record: the line continues in the next record.
	Partial bool
	// Content is the log text without the newline.
	Content []byte
}

// ParseCRI parses one CRI log line (without its trailing newline).
func ParseCRI(line []byte) (Record, error) {
	var r Record
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return r, fmt.Errorf("CRI log line %q: no timestamp delimiter", truncate(line))
	}
	t, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return r, fmt.Errorf("CRI log line timestamp: %w", err)
	}
	r.Time = t
	rest := line[i+1:]
	j := bytes.IndexByte(rest, ' ')
	if j < 0 {
		return r, fmt.Errorf("CRI log line %q: no stream delimiter", truncate(line))
	}
	r.Stream = string(rest[:j])
	if r.Stream != Stdout && r.Stream != Stderr {
		return r, fmt.Errorf("CRI log line: unknown stream %q", r.Stream)
	}
	rest = rest[j+1:]
	// The tag field ("P" or "F", possibly with more ':'-separated flags) was added to CRI
	// logs later; treat a line without it as a full line, as the kubelet does.
	k := bytes.IndexByte(rest, ' ')
	tag := rest
	if k >= 0 {
		tag = rest[:k]
	}
	switch {
	case len(tag) > 0 && (tag[0] == 'P' || tag[0] == 'F') && (len(tag) == 1 || tag[1] == ':'):
		r.Partial = tag[0] == 'P'
		if k >= 0 {
			r.Content = rest[k+1:]
		}
	default:
		r.Content = rest
	}
	return r, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// errLimit ends a read once LimitBytes are written.
var errLimit = errors.New("log byte limit reached")

type limitWriter struct {
	w      io.Writer
	remain int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.remain <= 0 {
		return 0, errLimit
	}
	if int64(len(p)) > l.remain {
		n, err := l.w.Write(p[:l.remain])
		l.remain -= int64(n)
		if err == nil {
			err = errLimit
		}
		return n, err
	}
	n, err := l.w.Write(p)
	l.remain -= int64(n)
	return n, err
}

// flusher is satisfied by http.ResponseWriter-like writers that buffer.
type flusher interface{ Flush() }

// ReadLogs writes the log file at path to w as plain text. With Follow it keeps reading
// until alive returns false and the file is drained, or ctx ends; alive may be nil
// (= not running).
func ReadLogs(ctx context.Context, path string, opts Options, w io.Writer, alive func() bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	defer f.Close()
	if opts.TailLines >= 0 {
		off, err := tailOffset(f, opts.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("seeking log file: %w", err)
		}
	}
	out := w
	if opts.LimitBytes > 0 {
		out = &limitWriter{w: w, remain: opts.LimitBytes}
	}
	poll := opts.PollInterval
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	fl, _ := w.(flusher)
	r := bufio.NewReader(f)
	var pending []byte
	for {
		chunk, err := r.ReadBytes('\n')
		if len(chunk) > 0 {
			pending = append(pending, chunk...)
		}
		if err == nil {
			if werr := writeRecord(out, pending[:len(pending)-1], opts); werr != nil {
				if errors.Is(werr, errLimit) {
					return nil
				}
				return werr
			}
			pending = pending[:0]
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading log file: %w", err)
		}
		if !opts.Follow {
			return nil
		}
		if fl != nil {
			fl.Flush()
		}
		// Check liveness before waiting so that the last bytes a container wrote before it
		// exited are read by the next pass and only then does the follow end.
		running := alive != nil && alive()
		if !running {
			// Drain whatever arrived between the EOF and the check.
			rest, _ := io.ReadAll(r)
			pending = append(pending, rest...)
			for len(pending) > 0 {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				if werr := writeRecord(out, pending[:i], opts); werr != nil {
					if errors.Is(werr, errLimit) {
						return nil
					}
					return werr
				}
				pending = pending[i+1:]
			}
			return nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func writeRecord(w io.Writer, line []byte, opts Options) error {
	if len(line) == 0 {
		return nil
	}
	rec, err := ParseCRI(line)
	if err != nil {
		// A corrupt line is skipped rather than ending the stream, as the kubelet does.
		return nil
	}
	if !opts.Since.IsZero() && rec.Time.Before(opts.Since) {
		return nil
	}
	var buf []byte
	if opts.Timestamps {
		buf = append(buf, rec.Time.Format(time.RFC3339Nano)...)
		buf = append(buf, ' ')
	}
	buf = append(buf, rec.Content...)
	if !rec.Partial {
		buf = append(buf, '\n')
	}
	_, err = w.Write(buf)
	return err
}

// tailOffset finds where the last n lines of f begin by scanning backwards in blocks.
func tailOffset(f *os.File, n int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat log file: %w", err)
	}
	size := st.Size()
	if n == 0 {
		return size, nil
	}
	const block = 32 * 1024
	buf := make([]byte, block)
	pos := size
	var newlines int64
	// A final newline ends the last line rather than starting an empty one.
	first := true
	for pos > 0 {
		sz := int64(block)
		if pos < sz {
			sz = pos
		}
		pos -= sz
		if _, err := f.ReadAt(buf[:sz], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reading log file: %w", err)
		}
		for i := sz - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				continue
			}
			if first && pos+i == size-1 {
				first = false
				continue
			}
			first = false
			newlines++
			if newlines == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}
