// Command conformance runs a list of Kubernetes e2e specs (e2e.test from
// k8s.io/kubernetes/test/e2e v1.37.2, built by tests/conformance/build.sh) against wasmplane
// and against the real control plane (etcd + kube-apiserver + kube-controller-manager), one
// after the other, and compares the two: pass counts, and the specs that pass on the real
// control plane but not on wasmplane, with the first line of the failure. tests/conformance/run
// is the front end; docs/conformance.md says how to read the output.
//
// e2e.test alone runs its specs one at a time (parallel ginkgo needs the ginkgo CLI), so
// the list is cut into -procs parts run by as many e2e.test processes side by side; the
// specs marked [Serial] run afterwards, alone. Most of a spec's time is spent polling, not
// computing, so the processes mostly wait and this fits two cores.
package main

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
)

func main() {
	e2e := flag.String("e2e", "", "path of e2e.test (tests/conformance/build.sh prints it)")
	specsFile := flag.String("specs", "tests/conformance/specs.txt", "the specs to run, one full name a line (# starts a comment)")
	slice := flag.String("slice", "", "run part of the list: N = its first N specs, I/K = the I-th of K equal parts (1-based)")
	only := flag.String("only", "", "run against one side only: wasmplane or peers (the other side's results, if an earlier run left them in -out, are still compared)")
	peersDir := flag.String("peers", "", "directory holding etcd, kube-apiserver, kube-controller-manager and kubectl v1.37.2")
	wasmplaneBin := flag.String("wasmplane", "", "the wasmplane binary")
	out := flag.String("out", "", "results directory: SIDE/ holds each side's logs and JUnit reports, SIDE.tsv its per-spec results")
	procs := flag.Int("procs", 4, "e2e.test processes run side by side")
	timeout := flag.Duration("timeout", 45*time.Minute, "bound on each side's run")
	reportOnly := flag.Bool("report", false, "run nothing: read the JUnit reports an earlier run left in -out again, and compare")
	resume := flag.Bool("resume", false, "run only the specs an earlier run into -out left without a pass or a failure (cut off by -timeout, or skipped), and merge the results")
	requirePass := flag.Bool("require-pass", false, "exit 1 unless every spec run passed on every side run (for CI)")
	node := flag.Bool("node", false, "run wasmplane with its built-in node (not --disable-kubelet) and let e2e.test count the schedulable nodes; the results go to -out/node, apart from the API-level list's (the real control plane here has no kubelet and is not run)")
	flag.Parse()
	log.SetFlags(0)
	if *e2e == "" || *out == "" {
		log.Fatal("-e2e and -out are required")
	}
	specs, err := readSpecs(*specsFile)
	if err != nil {
		log.Fatal(err)
	}
	if specs, err = cut(specs, *slice); err != nil {
		log.Fatal(err)
	}
	sides := []string{"wasmplane", "peers"}
	switch *only {
	case "":
	case "wasmplane", "peers":
		sides = []string{*only}
	default:
		log.Fatalf("-only %q: want wasmplane or peers", *only)
	}
	if *node {
		if *only == "peers" {
			log.Fatal("-node: the real control plane here has no kubelet; only wasmplane runs node specs")
		}
		sides = []string{"wasmplane"}
		*out = filepath.Join(*out, "node")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	// e2e.test runs in a directory of its own, and the kubeconfigs are under -out.
	for _, p := range []*string{out, e2e, peersDir, wasmplaneBin} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				log.Fatal(err)
			}
		}
	}
	kubectl := filepath.Join(*peersDir, "kubectl")
	if *reportOnly {
		for _, side := range sides {
			reports, _ := filepath.Glob(filepath.Join(*out, side, "*", "junit_*.xml"))
			resumed, _ := filepath.Glob(filepath.Join(*out, side+"-resumed", "*", "junit_*.xml"))
			// A resumed run's results are the newer ones.
			res, err := collectReports(append(resumed, reports...), specs)
			if err != nil {
				log.Fatal(err)
			}
			if err := writeResults(filepath.Join(*out, side+".tsv"), specs, res); err != nil {
				log.Fatal(err)
			}
		}
		report(os.Stdout, specs, *out)
		return
	}
	failed := false
	// The real control plane first: if it cannot start, nothing about wasmplane is
	// learned by waiting for its run.
	for i := len(sides) - 1; i >= 0; i-- {
		side := sides[i]
		run, prev := specs, map[string]result{}
		dir := filepath.Join(*out, side)
		if *resume {
			if prev, err = readResults(filepath.Join(*out, side+".tsv")); err != nil {
				log.Fatalf("-resume: %v", err)
			}
			run = nil
			for _, s := range specs {
				if st := prev[s].status; st != "passed" && st != "failed" {
					run = append(run, s)
				}
			}
			dir += "-resumed"
		}
		res := prev
		if len(run) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			start := time.Now()
			got, err := runSide(ctx, side, run, dir, runOpts{e2e: *e2e, peersDir: *peersDir, wasmplane: *wasmplaneBin, kubectl: kubectl, procs: *procs, node: *node})
			cancel()
			if err != nil {
				log.Fatalf("%s: %v", side, err)
			}
			for s, r := range got {
				res[s] = r
			}
			log.Printf("%s: %d of %d specs run passed in %s", side, count(run, got, "passed"), len(run), time.Since(start).Round(time.Second))
		}
		if err := writeResults(filepath.Join(*out, side+".tsv"), specs, res); err != nil {
			log.Fatal(err)
		}
		n := count(specs, res, "passed")
		if n+count(specs, res, "failed")+count(specs, res, "skipped") == 0 {
			log.Printf("%s: NO SPEC RAN: the suite's set-up failed; see %s/*/e2e.log", side, filepath.Join(*out, side))
		}
		log.Printf("%s: %d of %d specs passed", side, n, len(specs))
		if n != len(specs) {
			failed = true
		}
	}
	report(os.Stdout, specs, *out)
	if *requirePass && failed {
		os.Exit(1)
	}
}

// readSpecs reads one spec name a line; blank lines and # comments are skipped, and so is
// anything after a tab (excluded.txt's reason column), so both files read the same way.
func readSpecs(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var specs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "\t")
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		specs = append(specs, line)
	}
	return specs, sc.Err()
}

func cut(specs []string, slice string) ([]string, error) {
	if slice == "" {
		return specs, nil
	}
	if i, k, ok := strings.Cut(slice, "/"); ok {
		ii, err1 := strconv.Atoi(i)
		kk, err2 := strconv.Atoi(k)
		if err1 != nil || err2 != nil || kk < 1 || ii < 1 || ii > kk {
			return nil, fmt.Errorf("-slice %q: want I/K with 1 <= I <= K", slice)
		}
		lo, hi := len(specs)*(ii-1)/kk, len(specs)*ii/kk
		return specs[lo:hi], nil
	}
	n, err := strconv.Atoi(slice)
	if err != nil || n < 1 {
		return nil, fmt.Errorf("-slice %q: want N or I/K", slice)
	}
	return specs[:min(n, len(specs))], nil
}

type runOpts struct {
	e2e, peersDir, wasmplane, kubectl string
	procs                             int
	// node runs wasmplane with its node, for the specs that need one.
	node bool
}

// result is one spec's outcome on one side.
type result struct {
	status  string // passed, failed, skipped, or "not run"
	message string // the first line of the failure
}

// runSide starts one control plane, runs the specs against it and stops it.
func runSide(ctx context.Context, side string, specs []string, dir string, o runOpts) (map[string]result, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var cp *peers.ControlPlane
	var err error
	if side == "peers" {
		cp, err = peers.Start(ctx, peers.Options{Dir: o.peersDir, WorkDir: dir, ControllerManager: true})
	} else if o.node {
		cp, err = peers.StartWasmplane(ctx, o.wasmplane, dir)
	} else {
		// No node on either side: the list is of API-level specs, and the real control
		// plane here runs no kubelet either. Registry images would not run on wasmplane's
		// WASI node anyway.
		cp, err = peers.StartWasmplane(ctx, o.wasmplane, dir, "--disable-kubelet")
	}
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	log.Printf("%s is up at %s; running %d specs", side, cp.URL, len(specs))

	var parallel, serial []string
	for _, s := range specs {
		if strings.Contains(s, "[Serial]") || strings.Contains(s, "[Disruptive]") {
			serial = append(serial, s)
		} else {
			parallel = append(parallel, s)
		}
	}
	// The few [Serial] specs first and alone: run last, a time bound would cut them off.
	var errs []error
	if len(serial) > 0 {
		errs = append(errs, runE2E(ctx, o, cp.Kubeconfig, filepath.Join(dir, "serial"), serial))
	}
	procs := max(1, min(o.procs, len(parallel)))
	parts := make([][]string, procs)
	for i, s := range parallel {
		parts[i%procs] = append(parts[i%procs], s)
	}
	var wg sync.WaitGroup
	perr := make([]error, procs)
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			perr[i] = runE2E(ctx, o, cp.Kubeconfig, filepath.Join(dir, fmt.Sprintf("part%d", i+1)), part)
		}()
	}
	wg.Wait()
	errs = append(errs, perr...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return collect(dir, specs)
}

// runE2E runs e2e.test on a set of specs, its output in dir/e2e.log and its JUnit report
// in dir. A failing spec makes e2e.test exit 1; that is a result, not an error.
func runE2E(ctx context.Context, o runOpts, kubeconfig, dir string, specs []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	quoted := make([]string, len(specs))
	for i, s := range specs {
		quoted[i] = regexp.QuoteMeta(s)
	}
	// ginkgo matches the focus against "<suite description> <spec text>", so a leading
	// space and the end of the text make a name match only itself.
	focus := ` (?:` + strings.Join(quoted, "|") + `)$`
	// ginkgo's own bound comes first, with time left to clean up and write the report of
	// the specs that finished; the context's kill is the last resort.
	deadline, _ := ctx.Deadline()
	suiteTimeout := time.Until(deadline) - 2*time.Minute
	if suiteTimeout < time.Minute {
		log.Printf("%s: less than 3 minutes left; %d specs not run (-resume runs them)", dir, len(specs))
		return nil
	}
	args := []string{
		"--kubeconfig", kubeconfig,
		"--provider", "skeleton",
		"--report-dir", dir,
		"--kubectl-path", o.kubectl,
		"--ginkgo.focus", focus,
		"--ginkgo.timeout", suiteTimeout.Round(time.Second).String(),
		"--ginkgo.no-color",
	}
	if !o.node {
		// Neither side runs a node; without this the suite's set-up looks for schedulable
		// nodes to count and fails every spec. With the node it counts them itself.
		args = append(args, "--num-nodes", "0")
	}
	logf, err := os.Create(filepath.Join(dir, "e2e.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, o.e2e, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	cmd.Stdout, cmd.Stderr = logf, logf
	// e2e.test reads test data relative to its working directory.
	cmd.Dir = dir
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		return nil
	}
	if ctx.Err() != nil {
		// Out of time: the specs that finished are in the report ginkgo writes on
		// interruption, or missing and counted as not run.
		fmt.Fprintf(logf, "\nconformance: stopped at the time bound\n")
		return nil
	}
	return err
}

type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string `xml:"name,attr"`
			Status  string `xml:"status,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// collect reads every JUnit report under dir and finds each spec's case by name.
func collect(dir string, specs []string) (map[string]result, error) {
	reports, _ := filepath.Glob(filepath.Join(dir, "*", "junit_*.xml"))
	return collectReports(reports, specs)
}

func collectReports(reports []string, specs []string) (map[string]result, error) {
	byName := map[string]result{}
	var names []string
	for _, path := range reports {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var js junitSuites
		if err := xml.Unmarshal(b, &js); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range js.Suites {
			for _, c := range s.Cases {
				r := result{status: c.Status}
				switch {
				case c.Failure != nil:
					r.message = firstLine(c.Failure.Message + "\n" + c.Failure.Body)
				case c.Error != nil:
					r.message = firstLine(c.Error.Message + "\n" + c.Error.Body)
				}
				switch r.status {
				case "passed", "skipped", "pending":
				default:
					r.status = "failed"
				}
				// Every part's report lists the whole suite, the other parts' specs as
				// skipped: a result counts over a skip.
				prev, seen := byName[c.Name]
				if !seen {
					names = append(names, c.Name)
				}
				if !seen || prev.status == "skipped" {
					byName[c.Name] = r
				}
			}
		}
	}
	res := map[string]result{}
	for _, s := range specs {
		for _, n := range names {
			// A case is named "[It] <spec>", with the labels after it.
			if strings.Contains(n, s) {
				res[s] = byName[n]
				break
			}
		}
	}
	return res, nil
}

// firstLine is the failure's message, up to where ginkgo says where it happened, on one
// line: gomega's messages ("Expected\n    <int>: 1\nto equal...") say nothing on their
// first line alone.
func firstLine(s string) string {
	var kept []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "In [") || strings.HasPrefix(l, "Timeline >>") {
			break
		}
		l = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(l, "[FAILED]"), "[TIMEDOUT]"), "[PANICKED]")
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	line := strings.Join(strings.Fields(strings.Join(kept, " ")), " ")
	if r := []rune(line); len(r) > 200 {
		line = string(r[:200]) + "…"
	}
	return line
}

func count(specs []string, res map[string]result, status string) int {
	n := 0
	for _, s := range specs {
		if r, ok := res[s]; ok && r.status == status {
			n++
		}
	}
	return n
}

func writeResults(path string, specs []string, res map[string]result) error {
	var b strings.Builder
	for _, s := range specs {
		r, ok := res[s]
		if !ok {
			r.status = "not run"
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", r.status, s, strings.ReplaceAll(r.message, "\t", " "))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readResults(path string) (map[string]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := map[string]result{}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) == 3 {
			res[f[1]] = result{status: f[0], message: f[2]}
		}
	}
	return res, nil
}

// report prints both sides' pass counts over the specs run, and the specs that pass on the
// real control plane and not on wasmplane (the worklist), also written to
// out/differences.md as a Markdown table.
func report(w io.Writer, specs []string, out string) {
	res := map[string]map[string]result{}
	for _, side := range []string{"peers", "wasmplane"} {
		if r, err := readResults(filepath.Join(out, side+".tsv")); err == nil {
			res[side] = r
		}
	}
	fmt.Fprintf(w, "\n%d specs\n", len(specs))
	for _, side := range []string{"peers", "wasmplane"} {
		if r, ok := res[side]; ok {
			fmt.Fprintf(w, "  %-10s %3d passed, %3d failed, %3d skipped, %3d not run\n", side,
				count(specs, r, "passed"), count(specs, r, "failed"), count(specs, r, "skipped"),
				len(specs)-count(specs, r, "passed")-count(specs, r, "failed")-count(specs, r, "skipped"))
		}
	}
	if res["peers"] == nil || res["wasmplane"] == nil {
		return
	}
	var diff []string
	for _, s := range specs {
		if res["peers"][s].status == "passed" && res["wasmplane"][s].status != "passed" {
			diff = append(diff, s)
		}
	}
	sort.Strings(diff)
	fmt.Fprintf(w, "\n%d specs pass on the real control plane and not on wasmplane:\n", len(diff))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var md strings.Builder
	md.WriteString("| spec | wasmplane | first line of the failure |\n|---|---|---|\n")
	for _, s := range diff {
		r := res["wasmplane"][s]
		if r.status == "" {
			r.status = "not run"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s, r.status, r.message)
		fmt.Fprintf(&md, "| %s | %s | %s |\n", mdEscape(s), r.status, mdEscape(r.message))
	}
	tw.Flush()
	var back []string
	for _, s := range specs {
		if res["wasmplane"][s].status == "passed" && res["peers"][s].status != "passed" {
			back = append(back, s)
		}
	}
	if len(back) > 0 {
		fmt.Fprintf(w, "\n%d specs pass on wasmplane and not on the real control plane:\n", len(back))
		for _, s := range back {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", s, res["peers"][s].status, res["peers"][s].message)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "differences.md"), []byte(md.String()), 0o644); err != nil {
		log.Print(err)
	}
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
