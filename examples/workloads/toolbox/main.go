// Command toolbox is a tiny busybox-style multi-call program for WASI containers: exec
// probes, debugging, tests and the cri-tools conformance suite. The applet is argv[0]'s
// base name when that names one (so a container `command: ["echo", "hi"]` works), else
// argv[1] (so `toolbox echo hi` works too):
//
//	echo [-n] WORDS…   print the words
//	cat [FILE…]        print files (stdin without any)
//	write FILE TEXT    write TEXT to FILE
//	ls [-A] [DIR]      list a directory
//	pwd | env          print the working directory | the environment
//	exit N | true | false
//	alloc MIB          allocate and touch MIB mebibytes, then print "allocated N MiB"
//	sleep N            sleep N seconds (or a Go duration like 250ms)
//	top                sleep forever (busybox images' default command)
//	touch FILE…        create files
//	mkdir [-p] DIR…    create directories
//	test|[ -e|-f|-d P  test a path
//	hostname           print /etc/hostname (written by the runtime) or $HOSTNAME
//	dd if= of= bs= count=  copy blocks; /dev/zero and /dev/null are emulated
//	sh -c SCRIPT       run a small script: words (with '…' and "…" quoting) joined by
//	                   `;`, `&&`, `||`, and `while true; do …; done`
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// exitError carries an applet's exit status.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

var applets map[string]func([]string) error

func init() {
	applets = map[string]func([]string) error{
		"echo": echo, "cat": cat, "write": write, "ls": ls, "pwd": pwd, "env": env,
		"exit": exit, "true": func([]string) error { return nil }, "false": func([]string) error { return exitError(1) },
		"alloc": alloc, "sleep": sleep, "top": top, "sh": sh,
		"touch": touch, "mkdir": mkdir, "test": test, "[": test, "hostname": hostname, "dd": dd,
	}
}

func main() {
	args := os.Args
	if len(args) == 0 {
		args = []string{"toolbox"}
	}
	if _, ok := applets[filepath.Base(args[0])]; ok {
		args = append([]string{filepath.Base(args[0])}, args[1:]...)
	} else {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: toolbox echo|cat|write|ls|pwd|env|exit|true|false|alloc|sleep|top|sh …")
		os.Exit(2)
	}
	os.Exit(status(run(args)))
}

func status(err error) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return int(ee)
	default:
		fmt.Fprintf(os.Stderr, "toolbox: %v\n", err)
		return 1
	}
}

func run(args []string) error {
	f, ok := applets[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "%s: not found\n", args[0])
		return exitError(127)
	}
	if err := f(args[1:]); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return err
		}
		// Report like busybox: "touch: test.go: Read-only file system".
		var pe *os.PathError
		if errors.As(err, &pe) {
			msg := pe.Err.Error()
			fmt.Fprintf(os.Stderr, "%s: %s: %s\n", args[0], pe.Path, strings.ToUpper(msg[:1])+msg[1:])
		} else {
			fmt.Fprintf(os.Stderr, "%s: %v\n", args[0], err)
		}
		return exitError(1)
	}
	return nil
}

func touch(args []string) error {
	for _, p := range args {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
		now := time.Now()
		_ = os.Chtimes(p, now, now)
	}
	return nil
}

func mkdir(args []string) error {
	parents := len(args) > 0 && args[0] == "-p"
	if parents {
		args = args[1:]
	}
	for _, p := range args {
		var err error
		if parents {
			err = os.MkdirAll(p, 0o755)
		} else {
			err = os.Mkdir(p, 0o755)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// test supports the one-path forms: -e, -f, -d (and a trailing "]" for "[").
func test(args []string) error {
	if n := len(args); n > 0 && args[n-1] == "]" {
		args = args[:n-1]
	}
	if len(args) != 2 {
		return exitError(2)
	}
	fi, err := os.Stat(args[1])
	ok := err == nil
	switch args[0] {
	case "-e":
	case "-f":
		ok = ok && fi.Mode().IsRegular()
	case "-d":
		ok = ok && fi.IsDir()
	default:
		return exitError(2)
	}
	if !ok {
		return exitError(1)
	}
	return nil
}

func hostname([]string) error {
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		fmt.Println(strings.TrimSpace(string(b)))
		return nil
	}
	h := os.Getenv("HOSTNAME")
	if h == "" {
		return errors.New("no /etc/hostname and no $HOSTNAME")
	}
	fmt.Println(h)
	return nil
}

// dd copies count blocks of bs bytes; one block buffer of bs bytes is allocated, so
// `dd bs=20M` needs 20 MiB of memory as it does on Linux.
func dd(args []string) error {
	in, out, bs, count := "/dev/stdin", "/dev/stdout", int64(512), int64(-1)
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "if":
			in = v
		case "of":
			out = v
		case "bs":
			n, err := parseSize(v)
			if err != nil {
				return err
			}
			bs = n
		case "count":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return err
			}
			count = n
		default:
			return fmt.Errorf("unknown operand %s", a)
		}
	}
	buf := make([]byte, bs)
	for i := range buf { // commit the memory, as the kernel would on first write
		buf[i] = 0
	}
	var r io.Reader = os.Stdin
	switch in {
	case "/dev/zero":
		r = zeroReader{}
	case "/dev/stdin":
	default:
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var w io.Writer = os.Stdout
	switch out {
	case "/dev/null":
		w = io.Discard
	case "/dev/stdout":
	default:
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	for n := int64(0); count < 0 || n < count; n++ {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
	}
	return nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "K"), strings.HasSuffix(v, "k"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, v[:len(v)-1]
	case strings.HasSuffix(v, "G"):
		mult, v = 1<<30, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q", v)
	}
	return n * mult, nil
}

func echo(args []string) error {
	nl := "\n"
	if len(args) > 0 && args[0] == "-n" {
		nl, args = "", args[1:]
	}
	fmt.Print(strings.Join(args, " ") + nl)
	return nil
}

func cat(args []string) error {
	if len(args) == 0 {
		_, err := io.Copy(os.Stdout, os.Stdin)
		return err
	}
	for _, p := range args {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		os.Stdout.Write(b)
	}
	return nil
}

func write(args []string) error {
	if len(args) != 2 {
		return errors.New("want FILE TEXT")
	}
	return os.WriteFile(args[0], []byte(args[1]), 0o644)
}

func ls(args []string) error {
	all := false
	if len(args) > 0 && (args[0] == "-A" || args[0] == "-a") {
		all, args = true, args[1:]
	}
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if all || !strings.HasPrefix(e.Name(), ".") {
			fmt.Println(e.Name())
		}
	}
	return nil
}

func pwd([]string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	fmt.Println(wd)
	return nil
}

func env([]string) error {
	for _, e := range os.Environ() {
		fmt.Println(e)
	}
	return nil
}

func exit(args []string) error {
	n := 0
	if len(args) > 0 {
		n, _ = strconv.Atoi(args[0])
	}
	return exitError(n)
}

func alloc(args []string) error {
	mib := 1
	if len(args) > 0 {
		mib, _ = strconv.Atoi(args[0])
	}
	var keep [][]byte
	for range mib {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 { // touch every page
			b[j] = 1
		}
		keep = append(keep, b)
	}
	fmt.Printf("allocated %d MiB\n", len(keep))
	return nil
}

func sleep(args []string) error {
	d := time.Second
	if len(args) > 0 {
		if n, err := strconv.ParseFloat(args[0], 64); err == nil {
			d = time.Duration(n * float64(time.Second))
		} else if v, err := time.ParseDuration(args[0]); err == nil {
			d = v
		} else {
			return fmt.Errorf("invalid duration %q", args[0])
		}
	}
	time.Sleep(d)
	return nil
}

func top([]string) error {
	for {
		time.Sleep(time.Hour)
	}
}

// sh runs `sh -c SCRIPT`.
func sh(args []string) error {
	if len(args) < 2 || args[0] != "-c" {
		return errors.New("only `sh -c SCRIPT` is supported")
	}
	toks, err := tokenize(args[1])
	if err != nil {
		return err
	}
	return execList(toks)
}

// token is a word or an operator (";", "&&", "||").
type token struct {
	s  string
	op bool
}

func tokenize(script string) ([]token, error) {
	var toks []token
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			toks = append(toks, token{s: cur.String()})
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(script[i+1:], c)
			if j < 0 {
				return nil, errors.New("unterminated quote")
			}
			cur.WriteString(script[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			flush()
		case c == ';' || c == '\n':
			flush()
			toks = append(toks, token{s: ";", op: true})
		case c == '&' && i+1 < len(script) && script[i+1] == '&', c == '|' && i+1 < len(script) && script[i+1] == '|':
			flush()
			toks = append(toks, token{s: script[i : i+2], op: true})
			i++
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return toks, nil
}

// execList runs a token list: `while true; do BODY; done` loops, other commands are joined
// by ;, && and ||.
func execList(toks []token) error {
	var last error
	skip := false // the previous && or || decided the next command does not run
	for len(toks) > 0 {
		if toks[0].op {
			switch toks[0].s {
			case ";":
				skip = false
			case "&&":
				skip = last != nil
			case "||":
				skip = last == nil
			}
			toks = toks[1:]
			continue
		}
		if toks[0].s == "while" {
			body, rest, err := whileBody(toks)
			if err != nil {
				return err
			}
			if !skip {
				for {
					if err := execList(body); err != nil {
						last = err
					}
				}
			}
			toks = rest
			continue
		}
		var words []string
		for len(toks) > 0 && !toks[0].op {
			words = append(words, toks[0].s)
			toks = toks[1:]
		}
		if !skip {
			last = run(words)
			if last != nil {
				var ee exitError
				if !errors.As(last, &ee) {
					fmt.Fprintln(os.Stderr, last)
					last = exitError(1)
				}
			}
		}
	}
	return last
}

// whileBody parses `while true; do BODY; done` (the only condition supported).
func whileBody(toks []token) (body, rest []token, err error) {
	if len(toks) < 4 || toks[1].s != "true" || !toks[2].op || toks[3].s != "do" {
		return nil, nil, errors.New("only `while true; do …; done` loops are supported")
	}
	depth := 0
	for i := 4; i < len(toks); i++ {
		switch {
		case !toks[i].op && toks[i].s == "do":
			depth++
		case !toks[i].op && toks[i].s == "done":
			if depth == 0 {
				return toks[4:i], toks[i+1:], nil
			}
			depth--
		}
	}
	return nil, nil, errors.New("missing done")
}
