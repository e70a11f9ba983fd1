package storage

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec(scheme.Scheme)
	p := pod("ns", "a", map[string]string{"x": "y"})
	var buf bytes.Buffer
	if err := c.Encode(p, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), protobufPrefix) {
		t.Fatalf("pods must be stored as protobuf, got %q", buf.String()[:10])
	}
	if p.Kind != "" {
		t.Fatalf("encode must not leave the kind set on the caller's object: %q", p.Kind)
	}
	out := &corev1.Pod{}
	if _, _, err := c.Decode(buf.Bytes(), nil, out); err != nil {
		t.Fatal(err)
	}
	if out.Kind != "Pod" || out.APIVersion != "v1" || out.Labels["x"] != "y" {
		t.Fatalf("decoded %+v", out.TypeMeta)
	}
	// JSON (what a type without protobuf would be stored as) decodes too.
	js := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"}}`)
	obj, _, err := c.Decode(js, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if jp := obj.(*corev1.Pod); jp.Name != "j" || jp.Kind != "Pod" {
		t.Fatalf("decoded %+v", jp)
	}
}

// assertStatus checks the apierrors reason and code of err.
func assertStatus(t *testing.T, err error, reason metav1.StatusReason, code int32) {
	t.Helper()
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		t.Fatalf("want a %s status error, got %v", reason, err)
	}
	st := se.Status()
	if st.Reason != reason || st.Code != code {
		t.Fatalf("want %s/%d, got %s/%d: %s", reason, code, st.Reason, st.Code, st.Message)
	}
}

// modRev is the stored revision of key, 0 if absent: "nothing written" checks compare it.
func modRev(t *testing.T, key string) int64 {
	t.Helper()
	resp, err := testClient.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

func TestCRUD(t *testing.T) {
	for _, impl := range []string{"etcd", "cacher"} {
		t.Run(impl, func(t *testing.T) {
			var s Interface
			var cfg ResourceConfig
			if impl == "etcd" {
				e := newTestEtcd(t)
				s, cfg = e, e.Config()
			} else {
				c := newTestCacher(t, CacherConfig{FreshnessTimeout: 300 * time.Millisecond})
				s, cfg = c, c.cfg
			}
			testCRUD(t, s, cfg)
		})
	}
}

func testCRUD(t *testing.T, s Interface, cfg ResourceConfig) {
	ctx := testCtx(t)
	key := podKey(cfg, "ns", "a")
	created := &corev1.Pod{}
	in := pod("ns", "a", nil)
	in.ResourceVersion = "123" // must not be stored
	if err := s.Create(ctx, key, in, created); err != nil {
		t.Fatal(err)
	}
	rv := created.ResourceVersion
	if rv == "" || rv == "123" || created.Kind != "Pod" {
		t.Fatalf("created rv %q kind %q", rv, created.Kind)
	}
	resp, _ := testClient.Get(ctx, key)
	if strconv.FormatInt(resp.Kvs[0].ModRevision, 10) != rv {
		t.Fatalf("rv %s is not the mod revision %d", rv, resp.Kvs[0].ModRevision)
	}
	stored := &corev1.Pod{}
	if _, _, err := cfg.Codec.Decode(resp.Kvs[0].Value, nil, stored); err != nil || stored.ResourceVersion != "" {
		t.Fatalf("stored value carries resourceVersion %q (%v)", stored.ResourceVersion, err)
	}

	t.Run("errors", func(t *testing.T) {
		before := modRev(t, key)
		stale := "1"
		otherUID := types.UID("other")
		cases := []struct {
			name   string
			op     func() error
			reason metav1.StatusReason
			code   int32
		}{
			{"create existing", func() error { return s.Create(ctx, key, pod("ns", "a", nil), nil) },
				metav1.StatusReasonAlreadyExists, http.StatusConflict},
			{"get missing", func() error { return s.Get(ctx, podKey(cfg, "ns", "nope"), GetOptions{}, &corev1.Pod{}) },
				metav1.StatusReasonNotFound, http.StatusNotFound},
			{"update missing", func() error {
				return s.GuaranteedUpdate(ctx, podKey(cfg, "ns", "nope"), &corev1.Pod{}, false, nil,
					func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) { return in, nil })
			}, metav1.StatusReasonNotFound, http.StatusNotFound},
			{"update stale rv", func() error {
				return s.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, nil,
					func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
						p := in.(*corev1.Pod)
						p.ResourceVersion = "1"
						p.Labels = map[string]string{"changed": "yes"}
						return p, nil
					})
			}, metav1.StatusReasonConflict, http.StatusConflict},
			{"update uid precondition", func() error {
				return s.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, &Preconditions{UID: &otherUID},
					func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
						in.(*corev1.Pod).Labels = map[string]string{"changed": "yes"}
						return in, nil
					})
			}, metav1.StatusReasonConflict, http.StatusConflict},
			{"delete uid precondition", func() error {
				return s.Delete(ctx, key, &corev1.Pod{}, &Preconditions{UID: &otherUID}, nil)
			}, metav1.StatusReasonConflict, http.StatusConflict},
			{"delete rv precondition", func() error {
				return s.Delete(ctx, key, &corev1.Pod{}, &Preconditions{ResourceVersion: &stale}, nil)
			}, metav1.StatusReasonConflict, http.StatusConflict},
			{"delete validate", func() error {
				return s.Delete(ctx, key, &corev1.Pod{}, nil, func(context.Context, runtime.Object) error {
					return apierrors.NewForbidden(podsGR, "a", errors.New("no"))
				})
			}, metav1.StatusReasonForbidden, http.StatusForbidden},
			{"delete missing", func() error { return s.Delete(ctx, podKey(cfg, "ns", "nope"), &corev1.Pod{}, nil, nil) },
				metav1.StatusReasonNotFound, http.StatusNotFound},
			{"get future rv", func() error { return s.Get(ctx, key, GetOptions{ResourceVersion: "999999999"}, &corev1.Pod{}) },
				metav1.StatusReasonTimeout, http.StatusGatewayTimeout},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.op()
				assertStatus(t, err, tc.reason, tc.code)
				if tc.reason == metav1.StatusReasonNotFound || tc.reason == metav1.StatusReasonConflict ||
					tc.reason == metav1.StatusReasonAlreadyExists {
					if d := err.(apierrors.APIStatus).Status().Details; d == nil || d.Kind != "pods" {
						t.Fatalf("error does not name the resource: %+v", d)
					}
				}
				if got := modRev(t, key); got != before {
					t.Fatalf("a failed %s wrote: mod revision %d -> %d", tc.name, before, got)
				}
			})
		}
		if err := s.Get(ctx, podKey(cfg, "ns", "nope"), GetOptions{IgnoreNotFound: true}, &corev1.Pod{}); err != nil {
			t.Fatalf("IgnoreNotFound: %v", err)
		}
	})

	t.Run("update", func(t *testing.T) {
		got := &corev1.Pod{}
		uid := created.UID
		err := s.GuaranteedUpdate(ctx, key, got, false, &Preconditions{UID: &uid, ResourceVersion: &rv},
			func(in runtime.Object, res ResponseMeta) (runtime.Object, error) {
				if strconv.FormatUint(res.ResourceVersion, 10) != rv {
					t.Errorf("ResponseMeta rv %d, want %s", res.ResourceVersion, rv)
				}
				in.(*corev1.Pod).Labels = map[string]string{"v": "2"}
				return in, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion == rv || got.Labels["v"] != "2" {
			t.Fatalf("update result %s %v", got.ResourceVersion, got.Labels)
		}
		// An unchanged object is not written again.
		same := &corev1.Pod{}
		err = s.GuaranteedUpdate(ctx, key, same, false, nil,
			func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) { return in, nil })
		if err != nil {
			t.Fatal(err)
		}
		if same.ResourceVersion != got.ResourceVersion {
			t.Fatalf("no-op update made revision %s (was %s)", same.ResourceVersion, got.ResourceVersion)
		}
		// Unconditional update (empty rv in the returned object) wins.
		err = s.GuaranteedUpdate(ctx, key, same, false, nil,
			func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
				p := pod("ns", "a", map[string]string{"v": "3"})
				return p, nil
			})
		if err != nil || same.Labels["v"] != "3" {
			t.Fatalf("unconditional update: %v %v", err, same.Labels)
		}
		// ignoreNotFound creates.
		nk := podKey(cfg, "ns", "upserted")
		err = s.GuaranteedUpdate(ctx, nk, &corev1.Pod{}, true, nil,
			func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
				return pod("ns", "upserted", nil), nil
			})
		if err != nil || modRev(t, nk) == 0 {
			t.Fatalf("upsert: %v", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		cur := &corev1.Pod{}
		if err := s.Get(ctx, key, GetOptions{}, cur); err != nil {
			t.Fatal(err)
		}
		out := &corev1.Pod{}
		if err := s.Delete(ctx, key, out, &Preconditions{ResourceVersion: &cur.ResourceVersion}, nil); err != nil {
			t.Fatal(err)
		}
		drv, _ := strconv.ParseInt(out.ResourceVersion, 10, 64)
		crv, _ := strconv.ParseInt(cur.ResourceVersion, 10, 64)
		if out.Name != "a" || drv <= crv {
			t.Fatalf("deleted %s at rv %d (was %d)", out.Name, drv, crv)
		}
		if modRev(t, key) != 0 {
			t.Fatal("still there")
		}
	})
}

func TestConcurrentUpdates(t *testing.T) {
	s := newTestEtcd(t)
	ctx := testCtx(t)
	key := podKey(s.cfg, "ns", "counter")
	p := pod("ns", "counter", map[string]string{"n": "0"})
	if err := s.Create(ctx, key, p, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, nil,
				func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
					p := in.(*corev1.Pod)
					n, _ := strconv.Atoi(p.Labels["n"])
					p.Labels["n"] = strconv.Itoa(n + 1)
					return p, nil
				})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := &corev1.Pod{}
	if err := s.Get(ctx, key, GetOptions{}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["n"] != "50" {
		t.Fatalf("n = %s, want 50", got.Labels["n"])
	}
}

// TestUpdateFromStaleHint is what the cacher's GuaranteedUpdate relies on: a state that
// may be stale only saves a read, it never changes the outcome.
func TestUpdateFromStaleHint(t *testing.T) {
	s := newTestEtcd(t)
	ctx := testCtx(t)
	key := podKey(s.cfg, "ns", "a")
	v1 := &corev1.Pod{}
	if err := s.Create(ctx, key, pod("ns", "a", map[string]string{"n": "1"}), v1); err != nil {
		t.Fatal(err)
	}
	staleHint := func() *objState {
		resp, err := testClient.Get(ctx, key, clientv3.WithRev(mustInt(t, v1.ResourceVersion)))
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.state(key, resp.Kvs)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	setLabel(t, s, key, "n", "2")
	inc := func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
		p := in.(*corev1.Pod)
		n, _ := strconv.Atoi(p.Labels["n"])
		p.Labels["n"] = strconv.Itoa(n + 1)
		return p, nil
	}
	out := &corev1.Pod{}
	if err := s.guaranteedUpdate(ctx, key, out, false, nil, inc, staleHint()); err != nil {
		t.Fatal(err)
	}
	if out.Labels["n"] != "3" {
		t.Fatalf("n = %s, want 3 (based on the stored state, not the hint)", out.Labels["n"])
	}
	// A no-op on a stale hint returns the stored state, without writing.
	before := modRev(t, key)
	same := &corev1.Pod{}
	noop := func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) { return in, nil }
	if err := s.guaranteedUpdate(ctx, key, same, false, nil, noop, staleHint()); err != nil {
		t.Fatal(err)
	}
	if same.Labels["n"] != "3" || modRev(t, key) != before {
		t.Fatalf("no-op on a stale hint: %v, rev %d -> %d", same.Labels, before, modRev(t, key))
	}
	// Naming the current resourceVersion is not a conflict just because the hint is old.
	cur := out.ResourceVersion
	named := func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
		p := in.(*corev1.Pod)
		p.ResourceVersion = cur
		p.Labels["named"] = "yes"
		return p, nil
	}
	if err := s.guaranteedUpdate(ctx, key, &corev1.Pod{}, false, nil, named, staleHint()); err != nil {
		t.Fatalf("update naming the current rv from a stale hint: %v", err)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestObjectTooLarge checks that an object over etcd's request limit is refused with a
// 413 on create and on update, and that a refused update leaves the stored object as it
// was.
func TestObjectTooLarge(t *testing.T) {
	big := func(size int) *corev1.Pod {
		p := pod("ns", "big", nil)
		p.Annotations = map[string]string{"payload": strings.Repeat("x", size)}
		return p
	}
	for _, tc := range []struct {
		name    string
		size    int
		refused bool
	}{
		{"under the limit", 1400 << 10, false},
		{"over the limit", 1700 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestEtcd(t)
			cfg := s.Config()
			ctx := testCtx(t)
			key := podKey(cfg, "ns", "big")
			err := s.Create(ctx, key, big(tc.size), nil)
			if !tc.refused {
				if err != nil {
					t.Fatalf("create of %d bytes: %v", tc.size, err)
				}
				return
			}
			assertStatus(t, err, metav1.StatusReasonRequestEntityTooLarge, http.StatusRequestEntityTooLarge)
			if resp, err := testClient.Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
				t.Fatalf("a refused create left %d keys (%v)", len(resp.Kvs), err)
			}
			if err := s.Create(ctx, key, pod("ns", "big", nil), nil); err != nil {
				t.Fatal(err)
			}
			err = s.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, nil, func(in runtime.Object, _ ResponseMeta) (runtime.Object, error) {
				return big(tc.size), nil
			})
			assertStatus(t, err, metav1.StatusReasonRequestEntityTooLarge, http.StatusRequestEntityTooLarge)
			got := &corev1.Pod{}
			if err := s.Get(ctx, key, GetOptions{}, got); err != nil {
				t.Fatal(err)
			}
			if len(got.Annotations) != 0 {
				t.Fatalf("a refused update changed the stored object: %d annotations", len(got.Annotations))
			}
		})
	}
}
