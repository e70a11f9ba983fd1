package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/retry"
)

// createPods creates n pods named prefix-<i> in ns with a few parallel workers.
func createPods(t *testing.T, cs kubernetes.Interface, ns, prefix string, n int) {
	t.Helper()
	ctx := ctxFor(t)
	const workers = 16
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", prefix, i)}, Spec: podSpec()}
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range n {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			t.Fatalf("creating pods: %v", err)
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("creating pods: %v", err)
	default:
	}
}

// TestPaging lists 2,000 pods 100 at a time, with client-go's pager and by hand, and
// expects each exactly once, in 20 pages.
func TestPaging(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ns := newNamespace(t, cs, "paging")
	const total, pageSize = 2000, 100
	createPods(t, cs, ns, "p", total)

	t.Run("pager", func(t *testing.T) {
		seen := map[string]int{}
		pages := 0
		p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			pages++
			return cs.CoreV1().Pods(ns).List(ctx, opts)
		})
		p.PageSize = pageSize
		err := p.EachListItem(ctxFor(t), metav1.ListOptions{}, func(obj runtime.Object) error {
			seen[obj.(*corev1.Pod).Name]++
			return nil
		})
		if err != nil {
			t.Fatalf("paged list: %v", err)
		}
		checkExactlyOnce(t, seen, total)
		if pages != total/pageSize {
			t.Errorf("%d pages, want %d", pages, total/pageSize)
		}
	})

	t.Run("manual continue", func(t *testing.T) {
		seen := map[string]int{}
		opts := metav1.ListOptions{Limit: pageSize}
		var listRV string
		for pages := 1; ; pages++ {
			l, err := cs.CoreV1().Pods(ns).List(ctxFor(t), opts)
			if err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			if len(l.Items) > pageSize {
				t.Fatalf("page %d has %d items, limit %d", pages, len(l.Items), pageSize)
			}
			// Every page of one paged list is a view of the same revision.
			if listRV == "" {
				listRV = l.ResourceVersion
			} else if l.ResourceVersion != listRV {
				t.Fatalf("page %d at resourceVersion %s, first page at %s", pages, l.ResourceVersion, listRV)
			}
			for _, p := range l.Items {
				seen[p.Name]++
			}
			if l.Continue == "" {
				if l.RemainingItemCount != nil {
					t.Errorf("last page: remainingItemCount %d, want none", *l.RemainingItemCount)
				}
				if pages != total/pageSize {
					t.Errorf("%d pages, want %d", pages, total/pageSize)
				}
				break
			}
			// Set on every page but the last, as kube-apiserver does for a list without
			// selectors (conformance checks it).
			if rem := l.RemainingItemCount; rem == nil {
				t.Errorf("page %d: no remainingItemCount", pages)
			} else if int(*rem) != total-len(seen) {
				t.Errorf("page %d: remainingItemCount %d, want %d", pages, *rem, total-len(seen))
			}
			opts.Continue = l.Continue
			if pages > total {
				t.Fatal("paging does not end")
			}
		}
		checkExactlyOnce(t, seen, total)
	})
}

func checkExactlyOnce(t *testing.T, seen map[string]int, total int) {
	t.Helper()
	if len(seen) != total {
		t.Errorf("saw %d distinct pods, want %d", len(seen), total)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("pod %s listed %d times", name, n)
		}
	}
}

// TestConcurrentUpdates has 50 goroutines increment one counter with retry-on-conflict:
// optimistic concurrency must lose no update.
func TestConcurrentUpdates(t *testing.T) {
	srv := testserver.StartAPI(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			cs := srv.Clientset(t, m.json)
			ctx := ctxFor(t)
			ns := newNamespace(t, cs, "conc-"+m.name)
			cms := cs.CoreV1().ConfigMaps(ns)
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create: %v", err)
			}
			const writers = 50
			// client-go's DefaultRetry (5 tries) is meant for occasional conflicts, not for
			// 50 writers on one object: allow enough jittered tries for the last one.
			contended := wait.Backoff{Steps: 500, Duration: 5 * time.Millisecond, Factor: 1, Jitter: 1}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- retry.RetryOnConflict(contended, func() error {
						cm, err := cms.Get(ctx, "counter", metav1.GetOptions{})
						if err != nil {
							return err
						}
						n, err := strconv.Atoi(cm.Data["n"])
						if err != nil {
							return err
						}
						cm.Data["n"] = strconv.Itoa(n + 1)
						_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
						return err
					})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("increment: %v", err)
				}
			}
			cm, err := cms.Get(ctx, "counter", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if cm.Data["n"] != strconv.Itoa(writers) {
				t.Fatalf("counter = %s, want %d", cm.Data["n"], writers)
			}
		})
	}
}
