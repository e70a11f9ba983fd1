// Command classify sorts Kubernetes' [Conformance] specs into those that exercise the API
// alone and those that need a node (a kubelet running containers from registry images),
// from the suite's own source: test/conformance/testdata/conformance.yaml names each spec
// and its file, and the spec's body — with the BeforeEach blocks around it and, a few
// levels down, the functions of its package it calls — is searched for calls that only
// succeed once a pod runs (waits for Running or Ready, exec, logs, container output,
// webhook or API servers deployed as pods, schedulable nodes).
//
// It is a heuristic that errs towards keeping a spec: the real control plane, which runs
// no node in tests/conformance/run, is the check — a kept spec that fails there needs
// something this command did not see, and is moved to excluded.txt by hand with its reason.
//
// Usage: go run ./tests/conformance/cmd/classify [-src DIR] -specs specs.txt -excluded excluded.txt
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// nodeCalls are the calls that wait for, or talk to, running containers. Each maps to the
// reason written into excluded.txt.
var nodeCalls = []struct{ call, reason string }{
	{"deployWebhookAndService", "deploys its webhook server as a pod (agnhost image)"},
	{"deployCustomResourceWebhookAndService", "deploys its conversion webhook as a pod (agnhost image)"},
	{"SetUpSampleAPIServer", "deploys sample-apiserver as a pod (registry image)"},
	{"TestSampleAPIServer", "deploys sample-apiserver as a pod (registry image)"},
	{"DaemonSet", "a DaemonSet runs pods on nodes"},
	{"GetReadySchedulableNodes", "needs schedulable nodes"},
	{"GetRandomReadySchedulableNode", "needs schedulable nodes"},
	{"GetBoundedReadySchedulableNodes", "needs schedulable nodes"},
	{"GetNodeThatCanRunPod", "needs schedulable nodes"},
	{"WaitForAllNodesSchedulable", "needs schedulable nodes"},
	{"CreateSync", "waits for a pod to run"},
	{"CreateBatch", "waits for pods to run"},
	{"WaitForPodRunning", "waits for a pod to run"},
	{"WaitForPodNameRunning", "waits for a pod to run"},
	{"WaitForPodsRunning", "waits for pods to run"},
	{"WaitForPodsRunningReady", "waits for pods to run"},
	{"WaitForPodsWithLabelRunningReady", "waits for pods to run"},
	{"WaitForPodReady", "waits for a pod to be ready"},
	{"WaitTimeoutForPodReady", "waits for a pod to be ready"},
	{"WaitForPodsReady", "waits for pods to be ready"},
	{"WaitForPodSuccess", "waits for a pod to succeed"},
	{"WaitForPodTerminated", "waits for a pod to terminate"},
	{"WaitForPodNoLongerRunning", "waits for a pod to run, then stop"},
	{"WaitForPodContainerStarted", "waits for a container to start"},
	{"WaitForPodContainerToFail", "waits for a container to fail"},
	{"WaitForPodNotPending", "waits for a pod to leave Pending"},
	{"WaitForContainerRunning", "waits for a container to run"},
	{"WaitForControlledPodsRunning", "waits for pods to run"},
	{"VerifyPodsRunning", "waits for pods to run"},
	{"PodsResponding", "talks to running pods"},
	{"TestContainerOutput", "reads a container's output"},
	{"MatchContainerOutput", "reads a container's output"},
	{"GetPodLogs", "reads a container's logs"},
	{"LookForStringInLog", "reads a container's logs"},
	{"ExecCommandInContainer", "execs into a container"},
	{"ExecShellInContainer", "execs into a container"},
	{"ExecShellInPod", "execs into a container"},
	{"ExecWithOptions", "execs into a container"},
	{"CreateExecPodOrFail", "execs into a running pod"},
	{"RunHostCmd", "execs into a running pod"},
	{"WaitForDeploymentComplete", "waits for a Deployment's pods to be ready"},
	{"WaitForDeploymentRevisionAndImage", "waits for a Deployment's pods to be ready"},
	{"WaitForDeploymentRollbackCleared", "waits for a Deployment's pods to be ready"},
	{"WaitForDeploymentUpdatedReplicasGTE", "waits for a Deployment's pods to be ready"},
	{"WaitForReadyReplicaSet", "waits for a ReplicaSet's pods to be ready"},
	{"WaitForReadyReplicas", "waits for pods to be ready"},
	{"ReadyReplicas", "waits for pods to be ready"},
	{"WaitForRunningAndReady", "waits for StatefulSet pods to be ready"},
	{"WaitForStatusReadyReplicas", "waits for StatefulSet pods to be ready"},
	{"WaitForJobComplete", "waits for a Job's pods to complete"},
	{"WaitForJobFinish", "waits for a Job's pods to finish"},
	{"WaitForJobPodsRunning", "waits for a Job's pods to run"},
	{"WaitForJobPodsSucceeded", "waits for a Job's pods to succeed"},
	{"WaitForJobFailed", "waits for a Job's pods to fail"},
	{"WaitForJobReady", "waits for a Job's pods to be ready"},
	{"WaitForJobState", "waits for a Job's pods"},
	{"WaitForActiveJobs", "waits for a CronJob's pods"},
	{"waitForJobsAtLeast", "waits for a CronJob's pods to finish"},
	{"waitForAnyFinishedJob", "waits for a CronJob's pods to finish"},
	{"CheckServiceReachability", "connects to pods behind a Service"},
	{"StartServeHostnameService", "connects to pods behind a Service"},
	{"TestReplicationControllerServeImageOrFail", "connects to the pods it runs"},
	{"testReplicationControllerServeImageOrFail", "connects to the pods it runs"},
	{"testReplicaSetServeImageOrFail", "connects to the pods it runs"},
	{"execAffinityTest", "connects to pods behind a Service"},
	{"RunKubectl", "runs kubectl against running pods"},
	{"NewKubectlCommand", "runs kubectl against running pods"},
	{"ProxyGet", "proxies to a running pod or node"},
	{"Proxy()", "proxies to a running pod or node"},
	{"kubeletPort", "talks to a kubelet"},
	{"PodResize", "resizes a running pod's containers"},
	{"ResizeContainer", "resizes a running pod's containers"},
	{"EvictionSucceeds", "evicts running pods"},
	{"WaitForPodsResponding", "talks to running pods"},
	{"NodeSelector", "places pods on nodes"},
	{"checkDaemon", "a DaemonSet runs pods on nodes"},
	{"CheckDNS", "resolves names from a running pod"},
	{"validateDNSResults", "resolves names from a running pod"},
	{"validateTargetedProbeOutput", "resolves names from a running pod"},
	{"runPingTest", "connects between running pods"},
	{"DialFromContainer", "connects between running pods"},
	{"CheckPodHostnames", "connects to running pods"},
	{"taint", "taints nodes"},
	{"Taint", "taints nodes"},
	{"preemption", "schedules pods onto nodes"},
	{"runPausePod", "runs a pod on a node"},
	{"createPausePod", "runs a pod on a node"},
	{"WaitForPodCondition", "waits for a pod condition a kubelet sets"},
	{"ensurePodsAreRemovedWhenNamespaceIsDeleted", "waits for a pod to run"},
}

// byHand are the specs the search above keeps but that need a node all the same, read in
// the source one by one: the waits happen in watch handlers or closures it does not follow.
// The key is a part of the spec's name.
var byHand = []struct{ part, reason string }{
	{"Networking Granular Checks: Pods", "connects between running pods (by hand)"},
	{"Container Runtime blackbox test", "reads a finished container's status (by hand)"},
	{"InitContainer should", "runs init containers (by hand)"},
	{"Kubelet when scheduling a busybox command", "runs a container (by hand)"},
	{"Probing container", "probes a running container (by hand)"},
	{"Security Context When creating", "runs a container (by hand)"},
	{"Security Context when creating", "runs a container (by hand)"},
	{"Variable Expansion", "runs a container (by hand)"},
	{"Subpath Atomic writer volumes", "mounts volumes into a running container (by hand)"},
	{"should be capable to mount multiple trust bundles", "mounts trust bundles into a running container (by hand)"},
	{"should prevent a pod from starting if", "waits for the kubelet's events (by hand)"},
	{"should run through the lifecycle of Pods and PodStatus", "waits for the pod to run (by hand)"},
	{"RuntimeClass should schedule a Pod", "waits for the pod to be scheduled onto a node (by hand)"},
	// Found by the run against the real control plane without a node.
	{"EndpointsController should create Endpoints for Pods matching a Service", "needs running pods with IPs (failed on kube-apiserver without a node)"},
	{"OrderedNamespaceDeletion namespace deletion should delete pod first", "waits for a pod to run (failed on kube-apiserver without a node)"},
	{"DisruptionController should block an eviction until the PDB is updated", "waits for pods to be ready (failed on kube-apiserver without a node)"},
	{"DisruptionController should observe PodDisruptionBudget status updated", "waits for pods to be ready (failed on kube-apiserver without a node)"},
	{"DisruptionController should update/patch PodDisruptionBudget status", "waits for pods to be ready (failed on kube-apiserver without a node)"},
	{"ReplicaSet Replicaset should have a working scale subresource", "waits for pods to run (failed on kube-apiserver without a node)"},
	{"EndpointSlice should create Endpoints and EndpointSlices for Pods matching a Service", "needs running pods with IPs (failed on kube-apiserver without a node)"},
	{"VolumeAttachment Conformance", "takes a node from the node list (panicked on kube-apiserver without a node)"},
}

// lists sorts specs into the kept and the dropped, with the packages read so far.
type lists struct {
	pkgs       map[string]*pkgIndex
	keep, drop []string
}

// pkg reads the package in dir once.
func (l *lists) pkg(dir string) (*pkgIndex, error) {
	if p := l.pkgs[dir]; p != nil {
		return p, nil
	}
	p, err := indexPackage(dir)
	if err != nil {
		return nil, err
	}
	if l.pkgs == nil {
		l.pkgs = map[string]*pkgIndex{}
	}
	l.pkgs[dir] = p
	return p, nil
}

// add keeps the spec, or drops it with reason, or with the reason of the first hand
// correction whose part its name contains.
func (l *lists) add(name, reason string, hand []struct{ part, reason string }) {
	for _, h := range hand {
		if reason == "" && strings.Contains(name, h.part) {
			reason = h.reason
		}
	}
	if reason == "" {
		l.keep = append(l.keep, name)
	} else {
		l.drop = append(l.drop, name+"\t"+reason)
	}
}

type entry struct {
	Codename string `json:"codename"`
	File     string `json:"file"`
}

func main() {
	src := flag.String("src", "", "k8s.io/kubernetes v1.37.2 source (default: the module cache)")
	specsOut := flag.String("specs", "tests/conformance/specs.txt", "where the API-level specs go")
	exclOut := flag.String("excluded", "tests/conformance/excluded.txt", "where the rest go, with reasons")
	list := flag.String("list", "", "classify the feature specs instead: the output of `e2e.test -list-tests` (every spec's file:line and full name)")
	flag.Parse()
	if *src == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			log.Fatalf("go env GOMODCACHE: %v", err)
		}
		*src = filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@v1.37.2")
	}
	if *list != "" {
		if err := classifyFeatures(*src, *list, *specsOut, *exclOut); err != nil {
			log.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(filepath.Join(*src, "test/conformance/testdata/conformance.yaml"))
	if err != nil {
		log.Fatal(err)
	}
	var entries []entry
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		log.Fatalf("conformance.yaml: %v", err)
	}
	var l lists
	for _, e := range entries {
		name := strings.Join(strings.Fields(e.Codename), " ")
		p, err := l.pkg(filepath.Join(*src, filepath.Dir(e.File)))
		if err != nil {
			log.Fatal(err)
		}
		l.add(name, p.classify(filepath.Join(*src, e.File), name), byHand)
	}
	keep, drop := l.keep, l.drop
	sort.Strings(keep)
	sort.Strings(drop)
	head := "# Generated by `go run ./tests/conformance/cmd/classify` from k8s.io/kubernetes v1.37.2's\n" +
		"# test/conformance/testdata/conformance.yaml, then corrected by hand where noted.\n"
	write(*specsOut, head+"# The [Conformance] specs that exercise the API alone: no node, no registry image.\n", keep)
	write(*exclOut, head+"# The [Conformance] specs left out, each with the reason (spec<TAB>reason).\n", drop)
	fmt.Printf("%d specs kept, %d excluded\n", len(keep), len(drop))
}

func write(path, head string, lines []string) {
	var b bytes.Buffer
	b.WriteString(head)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}

// pkgIndex holds one e2e package: its files' source and its top-level functions' source,
// by name, to follow calls.
type pkgIndex struct {
	fset  *token.FileSet
	files map[string]*ast.File
	src   map[string][]byte
	funcs map[string][]ast.Node
}

func indexPackage(dir string) (*pkgIndex, error) {
	p := &pkgIndex{fset: token.NewFileSet(), files: map[string]*ast.File{}, src: map[string][]byte{}, funcs: map[string][]ast.Node{}}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(p.fset, path, b, 0)
		if err != nil {
			return nil, err
		}
		p.files[path], p.src[path] = f, b
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				p.funcs[fd.Name.Name] = append(p.funcs[fd.Name.Name], fd)
			}
		}
	}
	return p, nil
}

func (p *pkgIndex) text(n ast.Node) string {
	pos := p.fset.Position(n.Pos())
	end := p.fset.Position(n.End())
	return string(p.src[pos.Filename][pos.Offset:end.Offset])
}

// classify returns why the spec needs a node, or "" when nothing says it does.
func (p *pkgIndex) classify(file, name string) string {
	f := p.files[file]
	if f == nil {
		return "source file not found"
	}
	// The ConformanceIt whose text is the longest suffix of the spec's name, with the
	// BeforeEach/JustBeforeEach bodies of the containers around it.
	var best ast.Node
	var bestLen int
	var bestBefore []ast.Node
	eachCall(f, func(call *ast.CallExpr, stack []ast.Node) {
		if !isCall(call, "ConformanceIt") || len(call.Args) == 0 {
			return
		}
		s, ok := stringLit(call.Args[0])
		if !ok || !strings.Contains(name, s) || len(s) <= bestLen {
			return
		}
		best, bestLen, bestBefore = call, len(s), befores(stack)
	})
	if best == nil {
		return "" // kept; the run against the real control plane checks it
	}
	return p.searchCalls(best, bestBefore, func(string) bool { return true })
}

// searchCalls looks for the nodeCalls that use allows in a spec's leaf call, the
// BeforeEach blocks around it and, a few levels down, the functions of its package they
// call. It returns the first call's reason, or "" when none is found.
func (p *pkgIndex) searchCalls(best ast.Node, bestBefore []ast.Node, use func(call string) bool) string {
	seen := map[string]bool{}
	todo := append([]ast.Node{best}, bestBefore...)
	for depth := 0; depth < 4 && len(todo) > 0; depth++ {
		var next []ast.Node
		for _, n := range todo {
			t := p.text(n)
			for _, c := range nodeCalls {
				if use(c.call) && strings.Contains(t, c.call) {
					return c.reason
				}
			}
			ast.Inspect(n, func(m ast.Node) bool {
				if call, ok := m.(*ast.CallExpr); ok {
					var fn string
					switch f := call.Fun.(type) {
					case *ast.Ident:
						fn = f.Name
					case *ast.SelectorExpr:
						fn = f.Sel.Name
					}
					if fn != "" && !seen[fn] {
						seen[fn] = true
						next = append(next, p.funcs[fn]...)
					}
				}
				return true
			})
		}
		todo = next
	}
	return ""
}

// eachCall calls fn with every call in f, in source order, and the nodes around it.
func eachCall(f *ast.File, fn func(call *ast.CallExpr, stack []ast.Node)) {
	var stack []ast.Node
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		if call, ok := n.(*ast.CallExpr); ok {
			fn(call, stack)
		}
		return true
	})
}

// befores collects the BeforeEach and JustBeforeEach calls directly inside the function
// literals of the containers on the stack.
func befores(stack []ast.Node) []ast.Node {
	var out []ast.Node
	for _, n := range stack {
		lit, ok := n.(*ast.FuncLit)
		if !ok {
			continue
		}
		for _, st := range lit.Body.List {
			es, ok := st.(*ast.ExprStmt)
			if !ok {
				continue
			}
			if call, ok := es.X.(*ast.CallExpr); ok && (isCall(call, "BeforeEach") || isCall(call, "JustBeforeEach")) {
				out = append(out, call)
			}
		}
	}
	return out
}

func isCall(call *ast.CallExpr, name string) bool {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name == name
	case *ast.SelectorExpr:
		return f.Sel.Name == name
	}
	return false
}

func stringLit(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		a, ok1 := stringLit(v.X)
		b, ok2 := stringLit(v.Y)
		return a + b, ok1 && ok2
	}
	return "", false
}
