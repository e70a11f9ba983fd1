// Command crd measures custom resources on wasmplane and on the real kube-apiserver
// v1.37.2 + etcd side by side, in one run: creates/s of a custom object whose schema
// has 20 fields and 5 CEL rules, with 32 clients — sent by a typed client as an
// operator's Go types are, and by the dynamic client — beside ConfigMap creates/s of the
// same content through the typed clientset on the same server; then, with 200 CRDs installed, how long discovery takes (all
// resources, aggregated), how long the real kubectl's api-resources and explain take
// (wall time, cold cache) and how soon CRD number 201 is Established. Beside each
// server's CPU per create it prints the bench's own (its clients encode and decode on
// the same machine), and the sum of the two.
//
//	go run ./tests/bench/crd -peers /work/peers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/peers"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

type options struct {
	peersDir, only, bin string
	creates, workers    int
	rounds, crds        int
	// profileDir, when set, receives a CPU profile of wasmplane for each kind's first
	// round of creates (its /debug/pprof/profile).
	profileDir string
	profileFor time.Duration
	// memoryObjects 1 KiB custom objects are stored, within memoryTimeout, before the
	// servers' resident memory is read (0 skips that phase).
	memoryObjects int
	memoryTimeout time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.peersDir, "peers", peers.DefaultDir(), "directory holding etcd and kube-apiserver v1.37.2")
	flag.StringVar(&o.only, "only", "", "run one side only: wasmplane or kube-apiserver")
	flag.StringVar(&o.bin, "wasmplane-bin", "", "run this wasmplane binary instead of building ./cmd/wasmplane")
	flag.IntVar(&o.creates, "creates", 2000, "objects created per kind, server and round")
	flag.IntVar(&o.workers, "workers", 32, "parallel clients")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds (kinds and servers take turns in each)")
	flag.IntVar(&o.crds, "crds", 200, "CRDs installed before the discovery figures (0 skips them)")
	flag.IntVar(&o.memoryObjects, "memory-objects", 0, "store this many 1 KiB custom objects, then report each side's resident memory (0 skips it)")
	flag.DurationVar(&o.memoryTimeout, "memory-timeout", 10*time.Minute, "stop storing objects for the memory figures after this long, per server")
	flag.StringVar(&o.profileDir, "cpuprofile-dir", "", "write wasmplane's CPU profile of each kind's first round of creates (and its heap profile after the memory phase) here")
	flag.DurationVar(&o.profileFor, "cpuprofile-for", 5*time.Second, "how long each CPU profile runs (keep it shorter than a round)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		slog.Error("benchmark failed", "err", err)
		os.Exit(1)
	}
}

type server struct {
	name string
	cp   *peers.ControlPlane
	cfg  *rest.Config
	cs   kubernetes.Interface
	ext  apiextensionsclient.Interface
	dyn  dynamic.Interface
	// gizmos is the typed client for the custom objects (gizmo.go)
	gizmos *gizmoClient
	// per kind: objects created and time spent, over all rounds
	created map[string]int
	elapsed map[string]time.Duration
	// per kind: CPU time of the server's processes (kube-apiserver's includes its etcd)
	// while the objects were created, over all rounds: the cost per create that the
	// machine's load, unlike the rate, does not change much
	cpu map[string]time.Duration
	// per kind: CPU time of this process (the 32 clients encoding, decoding and waiting)
	// over the same creates, so that the report shows where the machine's CPU went
	clientCPU map[string]time.Duration
	// per kind: bytes the API server allocated on its heap over the same creates (its Go
	// runtime's count, which the machine's load does not change): what its collector works
	// through
	allocated map[string]float64
	// discovery figures
	discovery, established time.Duration
	// wall time of kubectl api-resources and kubectl explain <kind>.spec, with a cold
	// discovery cache
	apiResources, explain time.Duration
	// memory figures: objects stored, and resident bytes by process
	stored int
	rss    map[string]int64
	// wall time of a full LIST of the stored objects in JSON (median of listRounds),
	// read after the resident memory
	list time.Duration
}

// listRounds is how many full LISTs of the stored objects are timed.
const listRounds = 3

// The kinds each round creates: the custom object through a typed client (as an
// operator's Go types and generated clientset send it), the same object through the
// dynamic client (nested maps), and a ConfigMap of the same content through the typed
// clientset — the yardstick the custom creates are held to.
const (
	customTyped   = "custom object"
	customDynamic = "custom object, dynamic client"
	configMap     = "ConfigMap"
)

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "wasmplane-crd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, d := range []string{"kube", "wasmplane"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	kinds := []string{customTyped, customDynamic, configMap}
	var servers []*server
	if o.only != "wasmplane" {
		cp, err := peers.Start(ctx, peers.Options{Dir: o.peersDir, WorkDir: filepath.Join(work, "kube")})
		if err != nil {
			return fmt.Errorf("starting kube-apiserver: %w", err)
		}
		defer cp.Stop()
		servers = append(servers, &server{name: "kube-apiserver", cp: cp})
	}
	if o.only != "kube-apiserver" {
		cp, err := peers.StartWasmplane(ctx, o.bin, filepath.Join(work, "wasmplane"), "--disable-kubelet", "--disable-scheduler", "--disable-controllers")
		if err != nil {
			return fmt.Errorf("starting wasmplane: %w", err)
		}
		defer cp.Stop()
		servers = append(servers, &server{name: "wasmplane", cp: cp})
	}
	for _, s := range servers {
		if s.cfg, err = s.cp.RESTConfig(); err != nil {
			return err
		}
		s.cfg.QPS, s.cfg.Burst = -1, 0 // the server is measured, not client-side throttling
		if s.cs, err = kubernetes.NewForConfig(s.cfg); err != nil {
			return err
		}
		if s.ext, err = apiextensionsclient.NewForConfig(s.cfg); err != nil {
			return err
		}
		if s.dyn, err = dynamic.NewForConfig(s.cfg); err != nil {
			return err
		}
		if s.gizmos, err = newGizmoClient(s.cfg); err != nil {
			return err
		}
		s.created, s.elapsed, s.cpu, s.clientCPU = map[string]int{}, map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
		s.allocated = map[string]float64{}
		if err := establish(ctx, s, benchCRD("gizmos", "Gizmo", "bench.example.com", true)); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	// Each kind's first creates on a server pay for what is built once (the CRD's
	// validators and CEL programs, connections, caches): a warm-up round that is not
	// counted, so that the kind measured first is not charged for them.
	for _, s := range servers {
		for ki, kind := range kinds {
			if _, _, err := creates(ctx, s, kind, fmt.Sprintf("warm-k%d", ki), options{creates: min(o.workers*8, o.creates), workers: o.workers}); err != nil {
				return fmt.Errorf("%s %s warm-up: %w", s.name, kind, err)
			}
		}
	}
	for round := range o.rounds {
		// Each round starts with another kind, so that what one kind leaves behind (garbage
		// to collect, compaction) falls on each in turn: -rounds 3 evens it out.
		order := append(slices.Clone(kinds[round%len(kinds):]), kinds[:round%len(kinds)]...)
		for _, s := range servers {
			for _, kind := range order {
				ki := slices.Index(kinds, kind)
				var profiled chan error
				if o.profileDir != "" && round == 0 && s.name == "wasmplane" {
					profiled = make(chan error, 1)
					go func() { profiled <- peers.CPUProfile(ctx, s.cs, o.profileFor, o.profileDir, kind) }()
				}
				cpuBefore, err := s.cp.CPUTime()
				if err != nil {
					return err
				}
				selfBefore, err := peers.SelfCPU()
				if err != nil {
					return err
				}
				allocBefore, err := allocatedBytes(ctx, s)
				if err != nil {
					return err
				}
				n, d, err := creates(ctx, s, kind, fmt.Sprintf("r%d-k%d", round, ki), o) // names unique per round and kind
				selfAfter, serr := peers.SelfCPU()
				cpuAfter, cerr := s.cp.CPUTime()
				allocAfter, aerr := allocatedBytes(ctx, s)
				if err == nil {
					err = errors.Join(serr, cerr, aerr)
				}
				if profiled != nil {
					if perr := <-profiled; perr != nil && err == nil {
						err = perr
					}
				}
				if err != nil {
					return fmt.Errorf("%s %s round %d: %w", s.name, kind, round+1, err)
				}
				s.created[kind] += n
				s.elapsed[kind] += d
				s.cpu[kind] += cpuAfter - cpuBefore
				s.clientCPU[kind] += selfAfter - selfBefore
				s.allocated[kind] += allocAfter - allocBefore
			}
		}
	}
	if o.crds > 0 {
		for _, s := range servers {
			if err := discoveryFigures(ctx, s, o); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	if o.memoryObjects > 0 {
		for _, s := range servers {
			if err := memoryFigures(ctx, s, o); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if o.crds > 0 {
		fmt.Fprintf(tw, "server\tdiscovery with %d CRDs\tkubectl api-resources\tkubectl explain\tCRD %d Established\n", o.crds, o.crds+1)
		for _, s := range servers {
			fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%v\n", s.name, s.discovery.Round(time.Millisecond), s.apiResources.Round(time.Millisecond),
				s.explain.Round(time.Millisecond), s.established.Round(time.Millisecond))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Println()
	}
	// Per kind: the rate and the CPU per create of the server, of the bench's clients
	// (they share the machine) and of both, each also as a ratio to the ConfigMap's.
	fmt.Fprintf(tw, "server\tkind\tcreates/s\t/ConfigMap\tserver CPU per create\t/ConfigMap\tclients' CPU per create\tmachine CPU per create\t/ConfigMap\tAPI server's heap allocated per create\t/ConfigMap\n")
	for _, s := range servers {
		rate := func(k string) float64 { return float64(s.created[k]) / s.elapsed[k].Seconds() }
		alloc := func(k string) float64 { return s.allocated[k] / float64(max(s.created[k], 1)) }
		per := func(m map[string]time.Duration, k string) time.Duration {
			return m[k] / time.Duration(max(s.created[k], 1))
		}
		us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
		for _, k := range kinds {
			srv, cli := per(s.cpu, k), per(s.clientCPU, k)
			srvM, cliM := per(s.cpu, configMap), per(s.clientCPU, configMap)
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%v\t%.2f\t%v\t%v\t%.2f\t%.1f KiB\t%.2f\n", s.name, k, rate(k), rate(k)/rate(configMap),
				us(srv), float64(srv)/float64(srvM), us(cli), us(srv+cli), float64(srv+cli)/float64(srvM+cliM),
				alloc(k)/1024, alloc(k)/alloc(configMap))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.memoryObjects == 0 {
		return nil
	}
	fmt.Println()
	fmt.Fprintf(tw, "server\t1 KiB custom objects stored\tresident memory\tby process\tfull LIST, JSON (median of %d)\n", listRounds)
	for _, s := range servers {
		var total int64
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(s.rss)) {
			total += s.rss[name]
			parts = append(parts, fmt.Sprintf("%s %d MiB", name, s.rss[name]>>20))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d MiB\t%s\t%v\n", s.name, s.stored, total>>20, strings.Join(parts, ", "), s.list.Round(time.Millisecond))
	}
	return tw.Flush()
}

// memoryFigures stores o.memoryObjects custom objects of 1 KiB of data each (fewer if
// o.memoryTimeout passes first), lets the server settle, and reads the resident memory
// of each of its processes (wasmplane embeds its etcd; kube-apiserver has one beside).
func memoryFigures(ctx context.Context, s *server, o options) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "payloads.memory.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "memory.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "payloads", Kind: "Payload"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"data": {Type: "string", MaxLength: ptrTo[int64](4096)}}}}}}}}}}
	if err := establish(ctx, s, crd); err != nil {
		return err
	}
	payloads := s.dyn.Resource(schema.GroupVersionResource{Group: "memory.example.com", Version: "v1", Resource: "payloads"}).Namespace("default")
	data := strings.Repeat("0123456789abcdef", 64) // 1 KiB
	storing, cancel := context.WithTimeout(ctx, o.memoryTimeout)
	defer cancel()
	var next, stored atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range o.workers {
		wg.Go(func() {
			for storing.Err() == nil {
				i := next.Add(1)
				if i > int64(o.memoryObjects) {
					return
				}
				obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "memory.example.com/v1", "kind": "Payload",
					"metadata": map[string]any{"name": fmt.Sprintf("p-%06d", i)}, "spec": map[string]any{"data": data}}}
				if _, err := payloads.Create(storing, obj, metav1.CreateOptions{}); err != nil {
					if storing.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				stored.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("storing objects: %w", firstErr)
	}
	s.stored = int(stored.Load())
	// Settle: let the watch caches catch up and the runtimes collect; then read RSS.
	select {
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	if o.profileDir != "" && s.name == "wasmplane" {
		heap, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
		if err := os.WriteFile(filepath.Join(o.profileDir, "memory-heap.pprof"), heap, 0o644); err != nil {
			return err
		}
	}
	s.rss = map[string]int64{}
	for name, p := range s.cp.Procs {
		if name != "etcd" && name != "kube-apiserver" && name != "wasmplane" {
			continue
		}
		rss, err := peers.RSS(p.Pid)
		if err != nil {
			return err
		}
		s.rss[name] = rss
	}
	var lists []time.Duration
	for range listRounds {
		start := time.Now()
		body, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/apis/memory.example.com/v1/namespaces/default/payloads").
			SetHeader("Accept", "application/json").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("listing the stored objects: %w", err)
		}
		lists = append(lists, time.Since(start))
		if n := strings.Count(string(body), `"kind":"Payload"`); n != s.stored {
			return fmt.Errorf("the list has %d objects, want %d", n, s.stored)
		}
	}
	slices.Sort(lists)
	s.list = lists[len(lists)/2]
	return nil
}

// benchCRD is a namespaced CRD whose spec has 20 fields and, when rules is set, 5 CEL
// rules over them.
func benchCRD(plural, kind, group string, rules bool) *apiextensionsv1.CustomResourceDefinition {
	props := map[string]apiextensionsv1.JSONSchemaProps{}
	for i := 1; i <= 10; i++ {
		props[fmt.Sprintf("s%02d", i)] = apiextensionsv1.JSONSchemaProps{Type: "string", MaxLength: ptrTo[int64](64)}
		props[fmt.Sprintf("n%02d", i)] = apiextensionsv1.JSONSchemaProps{Type: "integer", Minimum: ptrTo[float64](0)}
	}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	if rules {
		spec.XValidations = apiextensionsv1.ValidationRules{
			{Rule: "self.n01 <= self.n02", Message: "n01 must not exceed n02"},
			{Rule: "self.s01 != 'forbidden'"},
			{Rule: "!has(self.s02) || self.s02.startsWith('g')"},
			{Rule: "self.n03 + self.n04 < 1000000"},
			{Rule: "size(self.s03) <= 32"},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}, Required: []string{"spec"}}}}}}}
}

func ptrTo[T any](v T) *T { return &v }

// allocatedBytes is how many bytes the API server of s has allocated on its heap since it
// started: go_memstats_alloc_bytes_total of its /metrics, which kube-apiserver and
// wasmplane both export (kube-apiserver's etcd, another process, is not counted). Reading
// it allocates too (kube-apiserver's metrics run to megabytes): a difference is divided
// by thousands of creates.
func allocatedBytes(ctx context.Context, s *server) (float64, error) {
	return scrape.MetricSum(ctx, s.cs, "go_memstats_alloc_bytes_total", nil)
}

// establish creates crd and waits until it is Established.
func establish(ctx context.Context, s *server, crd *apiextensionsv1.CustomResourceDefinition) error {
	if _, err := s.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := s.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// creates makes o.creates objects of kind with o.workers clients and returns how many
// and how long it took.
func creates(ctx context.Context, s *server, kind, prefix string, o options) (int, time.Duration, error) {
	gizmos := s.dyn.Resource(schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "gizmos"}).Namespace("default")
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range o.workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(o.creates) {
					return
				}
				name := fmt.Sprintf("%s-%d", prefix, i)
				var err error
				switch kind {
				case configMap:
					data := map[string]string{}
					for f := 1; f <= 10; f++ {
						data[fmt.Sprintf("s%02d", f)] = "gadget-value"
						data[fmt.Sprintf("n%02d", f)] = fmt.Sprint(f)
					}
					_, err = s.cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
				case customTyped:
					_, err = s.gizmos.create(ctx, "default", newGizmo(name))
				default:
					spec := map[string]any{}
					for f := 1; f <= 10; f++ {
						spec[fmt.Sprintf("s%02d", f)] = "gadget-value"
						spec[fmt.Sprintf("n%02d", f)] = int64(f)
					}
					obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "bench.example.com/v1", "kind": "Gizmo",
						"metadata": map[string]any{"name": name}, "spec": spec}}
					_, err = gizmos.Create(ctx, obj, metav1.CreateOptions{})
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return o.creates, time.Since(start), firstErr
}

// timeKubectl runs kubectl with args against kubeconfig with an empty cache directory
// (what a first command of a fresh client pays) and returns its wall time.
func timeKubectl(ctx context.Context, kubectl, kubeconfig string, args ...string) (time.Duration, error) {
	cache, err := os.MkdirTemp("", "kubectl-cache-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(cache)
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cache}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return time.Since(start), nil
}

// discoveryFigures installs n CRDs (without rules: their cost is the serving), then
// times a full discovery (what kubectl api-resources reads) and the Establishing of one
// more CRD.
func discoveryFigures(ctx context.Context, s *server, o options) error {
	n := o.crds
	for i := range n {
		crd := benchCRD(fmt.Sprintf("things%03d", i), fmt.Sprintf("Thing%03d", i), fmt.Sprintf("g%03d.bench.example.com", i), false)
		if _, err := s.ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %d: %w", i, err)
		}
	}
	// Wait until all are Established and discovery shows their groups (the built-in
	// groups are not counted: the next CRD must not queue behind these), then time a
	// fresh client's full discovery.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		crds, err := s.ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		established := 0
		for _, crd := range crds.Items {
			if strings.HasSuffix(crd.Spec.Group, ".bench.example.com") && apiextensionshelpers.IsCRDConditionTrue(&crd, apiextensionsv1.Established) {
				established++
			}
		}
		if established < n {
			return false, nil
		}
		dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
		if err != nil {
			return false, err
		}
		groups, err := dc.ServerGroups()
		if err != nil {
			return false, nil
		}
		served := 0
		for _, g := range groups.Groups {
			if strings.HasSuffix(g.Name, ".bench.example.com") {
				served++
			}
		}
		return served >= n, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d CRDs in discovery: %w", n, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, _, err := dc.ServerGroupsAndResources(); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	s.discovery = time.Since(start)
	kubectl := filepath.Join(o.peersDir, "kubectl")
	if s.apiResources, err = timeKubectl(ctx, kubectl, s.cp.Kubeconfig, "api-resources"); err != nil {
		return err
	}
	if s.explain, err = timeKubectl(ctx, kubectl, s.cp.Kubeconfig, "explain", "things000.spec"); err != nil {
		return err
	}
	start = time.Now()
	if err := establish(ctx, s, benchCRD("lastthings", "LastThing", "last.bench.example.com", false)); err != nil {
		return err
	}
	s.established = time.Since(start)
	if o.profileDir == "" || s.name != "wasmplane" {
		return nil
	}
	// One CRD is too quick to profile: more are created one by one while it runs.
	profiled := make(chan error, 1)
	go func() { profiled <- peers.CPUProfile(ctx, s.cs, o.profileFor, o.profileDir, "CRD establishing") }()
	for i := 0; ; i++ {
		select {
		case err := <-profiled:
			return err
		default:
		}
		crd := benchCRD(fmt.Sprintf("morethings%03d", i), fmt.Sprintf("MoreThing%03d", i), fmt.Sprintf("m%03d.bench.example.com", i), false)
		if err := establish(ctx, s, crd); err != nil {
			return err
		}
	}
}
