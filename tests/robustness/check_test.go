package robustness

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/apimachinery/pkg/watch"
)

// report is what one run checked and found.
type report struct {
	ops, unknown, lists, listChecks, events, segments, reconnects int
	acked, ackedSeen, ackedUncovered                              int
	linearizable                                                  porcupine.CheckResult
	visualization                                                 string
	violations                                                    []string
}

func (r *report) fail(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// checkLinearizable checks every object's history, consistent lists counted as reads of
// each object of the key set at the list's snapshot.
func checkLinearizable(r *report, h *history, keys []string, final listRecord, visualizationDir string) {
	ops := slices.Clone(h.ops)
	reads := append(slices.Clone(h.lists), final)
	for _, l := range reads {
		if !l.consistent {
			continue
		}
		for _, k := range keys {
			out := output{Status: statusNotFound}
			if it, ok := l.items[k]; ok {
				out = output{Status: statusOK, RV: it.RV, Value: it.Value}
			}
			ops = append(ops, porcupine.Operation{ClientId: l.client, Input: input{Kind: opGet, Name: k}, Call: l.call, Output: out, Return: l.ret})
		}
	}
	r.ops = len(ops)
	for _, op := range ops {
		if op.Output.(output).Status == statusUnknown {
			r.unknown++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(objectModel, ops, 2*time.Minute)
	r.linearizable = res
	if res != porcupine.Ok {
		path := filepath.Join(visualizationDir, "history.html")
		if err := porcupine.VisualizePath(objectModel, info, path); err == nil {
			r.visualization = path
		}
		r.fail("per-object history: %s (%d operations; visualization %s)%s", res, len(ops), r.visualization, illegalObject(ops))
	}
}

// illegalObject finds an object whose history alone is not linearizable and shows it, in
// call order, up to the shortest prefix that is not.
func illegalObject(ops []porcupine.Operation) string {
	for _, part := range objectModel.Partition(ops) {
		if porcupine.CheckOperations(objectModel, part) {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		// The shortest prefix (by call time) that is already illegal ends near the culprit.
		n := sort.Search(len(part), func(i int) bool { return !porcupine.CheckOperations(objectModel, part[:i+1]) })
		var b strings.Builder
		for _, op := range part[max(0, n-25):min(len(part), n+1)] {
			ret := "pending"
			if op.Return != pendingReturn {
				ret = fmt.Sprintf("%.3fs", float64(op.Return)/1e9)
			}
			fmt.Fprintf(&b, "\n  client %d [%.3fs, %s] %s", op.ClientId, float64(op.Call)/1e9, ret, objectModel.DescribeOperation(op.Input, op.Output))
		}
		return "; the first illegal prefix of one object's history ends with:" + b.String()
	}
	return ""
}

// stateAt replays a segment up to rv (listRV <= rv <= coveredTo).
func (s *segment) stateAt(rv int64) map[string]item {
	st := maps.Clone(s.initial)
	for _, e := range s.events {
		if e.RV > rv {
			break
		}
		if e.Type == watch.Deleted {
			delete(st, e.Name)
		} else {
			st[e.Name] = item{RV: e.RV, Value: e.Value}
		}
	}
	return st
}

// checkWatches checks every watch segment (event types follow the object's existence),
// that all watchers agree on what happened at each resourceVersion, that every list a
// segment covers equals the segment's state at the list's resourceVersion (no event
// missing between them), and that every acknowledged write appears in the watched history
// wherever a segment covers its revision.
func checkWatches(r *report, h *history, watchers []*watcher, final listRecord) {
	byRV := map[int64]watchEvent{}
	var segs []*segment
	for _, w := range watchers {
		w.mu.Lock()
		segs = append(segs, w.segments...)
		r.reconnects += w.reconnects
		w.mu.Unlock()
	}
	r.segments = len(segs)
	for _, s := range segs {
		st := maps.Clone(s.initial)
		for _, e := range s.events {
			r.events++
			_, present := st[e.Name]
			switch {
			case e.Type == watch.Added && present, e.Type != watch.Added && !present:
				r.fail("%s of %s at %d while the object %s", e.Type, e.Name, e.RV, map[bool]string{true: "exists", false: "does not exist"}[present])
			}
			if e.Type == watch.Deleted {
				delete(st, e.Name)
			} else {
				st[e.Name] = item{RV: e.RV, Value: e.Value}
			}
			if prev, ok := byRV[e.RV]; ok && prev != e {
				r.fail("two watchers disagree at resourceVersion %d: %+v and %+v", e.RV, prev, e)
			}
			byRV[e.RV] = e
		}
	}
	lists := append(slices.Clone(h.lists), final)
	r.lists = len(lists)
	for _, l := range lists {
		for _, s := range segs {
			if l.rv < s.listRV || l.rv > s.coveredTo {
				continue
			}
			r.listChecks++
			if want := s.stateAt(l.rv); !maps.Equal(want, l.items) {
				r.fail("%s list at %d by client %d has %v, the watch (from list at %d) shows %v", l.kind, l.rv, l.client, l.items, s.listRV, want)
			}
		}
	}
	for _, op := range h.ops {
		in, out := op.Input.(input), op.Output.(output)
		if out.Status != statusOK || in.Kind == opGet || in.Kind == opDelete || in.Kind == opDeleteRV {
			continue
		}
		r.acked++
		covered := false
		for _, s := range segs {
			if out.RV > s.listRV && out.RV <= s.coveredTo {
				covered = true
				break
			}
		}
		e, seen := byRV[out.RV]
		switch {
		case seen && (e.Name != in.Name || e.Value != in.Value || e.Type == watch.Deleted):
			r.fail("acknowledged %s of %s=%q at %d, the watch shows %+v there", in.Kind, in.Name, in.Value, out.RV, e)
		case seen:
			r.ackedSeen++
		case covered:
			r.fail("acknowledged %s of %s=%q at %d is missing from a watch covering it", in.Kind, in.Name, in.Value, out.RV)
		default:
			r.ackedUncovered++
		}
	}
}

// visualizationDir is where a failing run leaves its porcupine visualization.
func visualizationDir(name string) string {
	dir, err := os.MkdirTemp("", "wasmplane-robustness-"+name+"-")
	if err != nil {
		return os.TempDir()
	}
	return dir
}
