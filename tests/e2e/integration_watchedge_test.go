package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchEdgeCases covers the watch and patch answers Kubernetes gives to odd but legal
// requests: timeoutSeconds=0 (the server's default lifetime) and negative (400), a watch
// from a resourceVersion older than the watch cache (200, then one ERROR event carrying
// the 410 Expired Status, in JSON and protobuf), and a JSON patch whose test fails (422
// naming the path).
func TestWatchEdgeCases(t *testing.T) {
	srv := testserver.StartAPI(t)
	cs := srv.Clientset(t, false)
	ctx := ctxFor(t)
	ns := newNamespace(t, cs, "watchedge")
	cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := srv.HTTPClient(t)
	base := srv.URL() + "/api/v1/namespaces/" + ns + "/configmaps"

	t.Run("timeoutSeconds=0 is the default timeout", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"?watch=1&timeoutSeconds=0", nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		var ev metav1.WatchEvent
		if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || ev.Type != string(watch.Added) {
			t.Fatalf("first event %+v %v, want ADDED", ev, err)
		}
	})
	t.Run("a negative timeoutSeconds is a bad request", func(t *testing.T) {
		negative := int64(-1)
		_, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{TimeoutSeconds: &negative})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "timeoutSeconds") {
			t.Fatalf("want 400 about timeoutSeconds, got %v", err)
		}
	})
	t.Run("a failed JSON patch test names its path", func(t *testing.T) {
		patch := `[{"op":"test","path":"/data/color","value":"red"},{"op":"replace","path":"/data/color","value":"green"}]`
		_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
		var se *apierrors.StatusError
		if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.ErrStatus.Code != http.StatusUnprocessableEntity {
			t.Fatalf("want 422, got %v", err)
		}
		causes := se.ErrStatus.Details.Causes
		if len(causes) != 1 || causes[0].Field != "/data/color" || causes[0].Message != "testing value /data/color failed: test failed" {
			t.Fatalf("causes %+v", causes)
		}
		cur, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
		if err != nil || cur.Data["color"] != "blue" {
			t.Fatalf("the failed patch wrote something: %v %v", cur.Data, err)
		}
	})
	t.Run("a too old resourceVersion is a 410 ERROR event", func(t *testing.T) {
		// A restarted server's watch cache starts at the current revision: the
		// config map's first resourceVersion is older than anything it can replay.
		old := cm.ResourceVersion
		cm.Data["color"] = "green" // an update that changes nothing would not be written
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		srv = srv.Restart(t)
		// The restart may take a while on a loaded machine: a fresh deadline for the rest.
		ctx := ctxFor(t)
		cs, hc = srv.Clientset(t, false), srv.HTTPClient(t)
		base = srv.URL() + "/api/v1/namespaces/" + ns + "/configmaps"
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"?watch=1&resourceVersion="+old, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200 then an ERROR event", resp.StatusCode)
		}
		var ev struct {
			Type   string
			Object metav1.Status
		}
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		st := ev.Object
		if ev.Type != "ERROR" || st.Kind != "Status" || st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired ||
			!strings.HasPrefix(st.Message, "too old resource version: "+old+" (") {
			t.Fatalf("got %s", line)
		}
		for _, m := range modes {
			w, err := srv.Clientset(t, m.json).CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: old})
			if err != nil {
				t.Fatalf("%s: %v", m.name, err)
			}
			e := <-w.ResultChan()
			w.Stop()
			st, ok := e.Object.(*metav1.Status)
			if e.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(st)) {
				t.Fatalf("%s: got %s %#v", m.name, e.Type, e.Object)
			}
		}
	})
}
