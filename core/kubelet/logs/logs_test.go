package logs

import (
	"bytes"
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseCRI(t *testing.T) {
	tests := []struct {
		line    string
		stream  string
		partial bool
		content string
		err     bool
	}{
		{line: "2016-10-06T00:17:09.669794202Z stdout F hello world", stream: "stdout", content: "hello world"},
		{line: "2016-10-06T00:17:09.669794202Z stderr P part", stream: "stderr", partial: true, content: "part"},
		{line: "2016-10-06T00:17:09.669794202Z stdout F ", stream: "stdout", content: ""},
		{line: "2016-10-06T00:17:09.669794202Z stdout F", stream: "stdout", content: ""},
		{line: "2016-10-06T00:17:09.669794202Z stdout old format line", stream: "stdout", content: "old format line"},
		{line: "2016-10-06T00:17:09Z stdout F: spaced  content ", stream: "stdout", content: "spaced  content "},
		{line: "garbage", err: true},
		{line: "2016-10-06T00:17:09Z nostream F x", err: true},
		{line: "notatime stdout F x", err: true},
	}
	for _, tc := range tests {
		r, err := ParseCRI([]byte(tc.line))
		if (err != nil) != tc.err {
			t.Errorf("%q: err = %v", tc.line, err)
			continue
		}
		if err == nil && (r.Stream != tc.stream || r.Partial != tc.partial || string(r.Content) != tc.content) {
			t.Errorf("%q: got %+v", tc.line, r)
		}
	}
}

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func line(i int, stream, tag, content string) string {
	return fmt.Sprintf("%s %s %s %s\n", base.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), stream, tag, content)
}

func writeLog(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLogs(t *testing.T) {
	path := writeLog(t,
		line(0, "stdout", "F", "one"),
		line(1, "stderr", "F", "two"),
		line(2, "stdout", "P", "thr"),
		line(3, "stdout", "F", "ee"),
		line(4, "stdout", "F", "four"),
	)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "all", opts: Options{TailLines: -1}, want: "one\ntwo\nthree\nfour\n"},
		{name: "tail 2", opts: Options{TailLines: 2}, want: "ee\nfour\n"},
		{name: "tail 0", opts: Options{TailLines: 0}, want: ""},
		{name: "tail more than lines", opts: Options{TailLines: 50}, want: "one\ntwo\nthree\nfour\n"},
		{name: "since", opts: Options{TailLines: -1, Since: base.Add(1500 * time.Millisecond)}, want: "three\nfour\n"},
		{name: "limit bytes", opts: Options{TailLines: -1, LimitBytes: 6}, want: "one\ntw"},
		{name: "timestamps", opts: Options{TailLines: 1, Timestamps: true}, want: base.Add(4*time.Second).Format(time.RFC3339Nano) + " four\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ReadLogs(context.Background(), path, tc.opts, &out, nil); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}

func TestReadLogsMissingFile(t *testing.T) {
	if err := ReadLogs(context.Background(), filepath.Join(t.TempDir(), "nope"), Options{TailLines: -1}, &bytes.Buffer{}, nil); err == nil {
		t.Fatal("no error for a missing file")
	}
}

// syncBuffer is a buffer safe for a reader and a writer goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestFollowStopsWhenContainerExits(t *testing.T) {
	path := writeLog(t, line(0, "stdout", "F", "first"))
	var alive atomic.Bool
	alive.Store(true)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(context.Background(), path, Options{TailLines: -1, Follow: true, PollInterval: 5 * time.Millisecond}, out, alive.Load)
	}()
	waitFor(t, func() bool { return out.String() == "first\n" })
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A line written in two pieces is only shown once complete.
	full := line(1, "stdout", "F", "second")
	_, _ = f.WriteString(full[:10])
	_, _ = f.WriteString(full[10:])
	waitFor(t, func() bool { return out.String() == "first\nsecond\n" })
	_, _ = f.WriteString(line(2, "stdout", "F", "last words"))
	f.Close()
	alive.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end after the container exited")
	}
	if got := out.String(); got != "first\nsecond\nlast words\n" {
		t.Errorf("followed %q", got)
	}
}

func TestFollowEndsWithContext(t *testing.T) {
	path := writeLog(t, line(0, "stdout", "F", "x"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ReadLogs(ctx, path, Options{TailLines: -1, Follow: true, PollInterval: 5 * time.Millisecond}, &syncBuffer{}, func() bool { return true })
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("follow ignored its context")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("condition not met: %v", err)
	}
}
