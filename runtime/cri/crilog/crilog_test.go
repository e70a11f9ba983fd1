package crilog

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func fixedFile(t *testing.T) (*File, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pod", "c", "0.log")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.now = func() time.Time { return time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC) }
	return f, p
}

func TestWriterFormat(t *testing.T) {
	long := strings.Repeat("x", MaxLineSize+10)
	tests := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"one line", []string{"hello\n"}, []string{"2016-10-06T00:17:09.669794202Z stdout F hello"}},
		{"split across writes", []string{"hel", "lo\nwor", "ld\n"}, []string{
			"2016-10-06T00:17:09.669794202Z stdout F hello",
			"2016-10-06T00:17:09.669794202Z stdout F world",
		}},
		{"empty line", []string{"\n"}, []string{"2016-10-06T00:17:09.669794202Z stdout F "}},
		{"no trailing newline is flushed as F", []string{"tail"}, []string{"2016-10-06T00:17:09.669794202Z stdout F tail"}},
		{"long line becomes partial + full", []string{long + "\n"}, []string{
			"2016-10-06T00:17:09.669794202Z stdout P " + long[:MaxLineSize],
			"2016-10-06T00:17:09.669794202Z stdout F " + long[MaxLineSize:],
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, p := fixedFile(t)
			w := f.Writer(Stdout)
			for _, s := range tc.writes {
				if _, err := w.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestConcurrentStreamsAndReopen(t *testing.T) {
	f, p := fixedFile(t)
	out, errw := f.Writer(Stdout), f.Writer(Stderr)
	var wg sync.WaitGroup
	for _, w := range []*Writer{out, errw} {
		wg.Go(func() {
			for range 500 {
				w.Write([]byte("abc"))
				w.Write([]byte("def\n"))
			}
		})
	}
	wg.Wait()
	// Rotation: the kubelet renames the file, then asks for a reopen.
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err != nil {
		t.Fatal(err)
	}
	out.Write([]byte("after\n"))
	f.Close()
	old, _ := os.ReadFile(p + ".1")
	lines := strings.Split(strings.TrimSuffix(string(old), "\n"), "\n")
	if len(lines) != 1000 {
		t.Fatalf("got %d lines before rotation, want 1000", len(lines))
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " F abcdef") {
			t.Fatalf("interleaved record %q", l)
		}
	}
	now, _ := os.ReadFile(p)
	if !strings.HasSuffix(string(now), "stdout F after\n") {
		t.Errorf("after reopen: %q", now)
	}
}

func TestDiscard(t *testing.T) {
	f, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	w := f.Writer(Stdout)
	if _, err := w.Write([]byte("ignored\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
