package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// listRecord is one list the traffic made: a snapshot of the namespace at RV.
type listRecord struct {
	client      int
	call, ret   int64
	kind        string // "consistent", "paged" or "cache"
	rv          int64
	items       map[string]item
	consistent  bool
	pagesServed int
}

// item is one ConfigMap as a list or a watch event shows it.
type item struct {
	RV    int64
	Value string
}

// history collects what every client did, with times relative to its start.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	lists []listRecord
	// refused counts requests refused outright (no effect) by kind, e.g. an unconditional
	// update answered 422.
	refused map[string]int
	// failed counts requests that failed before reaching the server (connection refused).
	failed int
	// violations are guarantees seen broken while the traffic ran.
	violations []string
}

func (h *history) violation(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
}

func newHistory() *history {
	return &history{start: time.Now(), refused: map[string]int{}}
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) addOp(client int, in input, call int64, out output, ret int64) {
	if out.Status == statusUnknown {
		ret = pendingReturn
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// classify maps a request's error to what the client knows of its effect; ok=false means it
// certainly had none (refused before the request left, or refused by validation).
func classify(err error) (status, string, bool) {
	switch {
	case err == nil:
		return statusOK, "", true
	case apierrors.IsNotFound(err):
		return statusNotFound, "", true
	case apierrors.IsConflict(err):
		return statusConflict, "", true
	case apierrors.IsAlreadyExists(err):
		return statusExists, "", true
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsForbidden(err):
		return 0, string(apierrors.ReasonForError(err)), false
	case errors.Is(err, syscall.ECONNREFUSED):
		return 0, "connection refused", false
	}
	// Timeouts, resets, 5xx, 429: the write may or may not have been applied.
	return statusUnknown, "", true
}

// trafficConfig shapes the traffic of one run.
type trafficConfig struct {
	namespace string
	keys      []string
	clients   []kubernetes.Interface // one per traffic client (several may share a server)
}

// runTraffic sends requests from every client until ctx ends.
func runTraffic(ctx context.Context, h *history, cfg trafficConfig) {
	var wg sync.WaitGroup
	for i, cs := range cfg.clients {
		wg.Go(func() {
			c := &trafficClient{id: i, cs: cs, h: h, ns: cfg.namespace, keys: cfg.keys, lastRV: map[string]int64{},
				rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
			for ctx.Err() == nil {
				c.step(ctx)
			}
		})
	}
	wg.Wait()
}

// trafficClient is one client's loop; lastRV is the resourceVersion it last saw of each
// object, which its conditional writes use as precondition (often stale on purpose).
type trafficClient struct {
	id     int
	cs     kubernetes.Interface
	h      *history
	ns     string
	keys   []string
	rng    *rand.Rand
	seq    int
	lastRV map[string]int64
}

func (c *trafficClient) value() string {
	c.seq++
	return fmt.Sprintf("c%d-%d", c.id, c.seq)
}

func configMap(ns, name, value string, rv int64) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": value}}
	if rv != 0 {
		cm.ResourceVersion = strconv.FormatInt(rv, 10)
	}
	return cm
}

func parseRV(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// step sends one request, chosen at random, with a per-request deadline so that a stopped
// server shows as unknown outcomes rather than a stuck client.
func (c *trafficClient) step(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	name := c.keys[c.rng.IntN(len(c.keys))]
	cms := c.cs.CoreV1().ConfigMaps(c.ns)
	p := c.rng.IntN(100)
	var (
		in  = input{Name: name}
		obj *corev1.ConfigMap
		err error
	)
	call := c.h.now()
	switch {
	case p < 15:
		in.Kind = opGet
		obj, err = cms.Get(ctx, name, metav1.GetOptions{})
	case p < 23:
		c.list(ctx, "consistent")
		return
	case p < 28:
		c.list(ctx, "paged")
		return
	case p < 33:
		c.list(ctx, "cache")
		return
	case p < 48:
		in.Kind, in.Value = opCreate, c.value()
		obj, err = cms.Create(ctx, configMap(c.ns, name, in.Value, 0), metav1.CreateOptions{})
	case p < 66:
		in.Kind, in.Value, in.RV = opUpdate, c.value(), c.lastRV[name]
		if in.RV == 0 {
			in.RV = 1 // a precondition nobody matches: a conflict or not found
		}
		obj, err = cms.Update(ctx, configMap(c.ns, name, in.Value, in.RV), metav1.UpdateOptions{})
	case p < 72:
		in.Kind, in.Value = opUpdateNoRV, c.value()
		obj, err = cms.Update(ctx, configMap(c.ns, name, in.Value, 0), metav1.UpdateOptions{})
	case p < 84:
		in.Kind, in.Value = opPatch, c.value()
		obj, err = cms.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"v":%q}}`, in.Value), metav1.PatchOptions{})
	case p < 92:
		in.Kind = opDelete
		err = cms.Delete(ctx, name, metav1.DeleteOptions{})
	default:
		in.Kind, in.RV = opDeleteRV, c.lastRV[name]
		if in.RV == 0 {
			in.RV = 1
		}
		rv := strconv.FormatInt(in.RV, 10)
		err = cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	}
	ret := c.h.now()
	st, reason, effect := classify(err)
	if !effect {
		if reason == "connection refused" {
			pause(parent, 20*time.Millisecond) // the server is down: do not spin
		}
		c.h.mu.Lock()
		if reason == "connection refused" {
			c.h.failed++
		} else {
			c.h.refused[in.Kind.String()+" "+reason+" ("+truncate(err.Error(), 80)+")"]++
		}
		c.h.mu.Unlock()
		return
	}
	if st == statusUnknown && in.Kind == opGet {
		return // a read that got no answer tells nothing
	}
	out := output{Status: st}
	if st == statusOK && obj != nil {
		out.RV, out.Value = parseRV(obj.ResourceVersion), obj.Data["v"]
		c.lastRV[name] = out.RV
	}
	c.h.addOp(c.id, in, call, out, ret)
}

// list lists the namespace: consistent (one page), paged (pages of 2 from one snapshot)
// or from the watch cache (resourceVersion=0).
func (c *trafficClient) list(ctx context.Context, kind string) {
	cms := c.cs.CoreV1().ConfigMaps(c.ns)
	rec := listRecord{client: c.id, kind: kind, items: map[string]item{}, consistent: kind != "cache"}
	rec.call = c.h.now()
	opts := metav1.ListOptions{}
	switch kind {
	case "paged":
		opts.Limit = 2
	case "cache":
		opts.ResourceVersion = "0"
	}
	for {
		l, err := cms.List(ctx, opts)
		if err != nil {
			return // an unanswered or expired list tells nothing
		}
		if rec.pagesServed == 0 {
			rec.ret = c.h.now()
			rec.rv = parseRV(l.ResourceVersion)
		} else if parseRV(l.ResourceVersion) != rec.rv {
			c.h.violation("page %d of a paged list at rv %s, its first page at %d", rec.pagesServed+1, l.ResourceVersion, rec.rv)
			return
		}
		rec.pagesServed++
		for _, cm := range l.Items {
			rec.items[cm.Name] = item{RV: parseRV(cm.ResourceVersion), Value: cm.Data["v"]}
			c.lastRV[cm.Name] = parseRV(cm.ResourceVersion)
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	c.h.mu.Lock()
	c.h.lists = append(c.h.lists, rec)
	c.h.mu.Unlock()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
