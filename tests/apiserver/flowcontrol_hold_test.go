// The held-refusal tests drive wasmplane's own addition to API Priority and Fairness
// against a real server on loopback: a tenant refused continuously has its 429s held
// (the same response, later), and with the hold turned off none is.

package apiserver

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/core/server"
	"github.com/wasmplane/wasmplane/tests/internal/scrape"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"github.com/wasmplane/wasmplane/tests/internal/waitfor"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
)

// TestHeldRefusals: a tenant on a one-share level that rejects floods the server with 64
// concurrent LISTs; with the hold on (the default) its refusals are held once it has been
// refused for a second (wasmplane_apf_held_refusals_total grows), every 429 still
// carries Retry-After and the level's and schema's UIDs, and another user's GETs are
// served meanwhile; with --apf-refusal-hold=0 nothing is held during a flood refused
// for as long.
func TestHeldRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a server for several seconds")
	}
	for _, tt := range []struct {
		name string
		hold time.Duration
	}{{"hold on by default", 0}, {"hold off", -1}} {
		t.Run(tt.name, func(t *testing.T) {
			s := testserver.StartAPI(t, func(c *server.Config) { c.APFRefusalHold = tt.hold })
			cs := s.Clientset(t, true)
			ctx := context.Background()
			grantConfigMapReads(t, cs)
			pl, fs, err := tinyTenantLevel(ctx, cs, "tenant-held", "tenant-held")
			if err != nil {
				t.Fatal(err)
			}
			flooder, other := userClient(t, s, "flooder"), userClient(t, s, "bystander")
			list := s.URL() + "/api/v1/namespaces/default/configmaps"
			waitfor.Condition(t, time.Minute, "the tenant's requests to be classified on its level", func(ctx context.Context) (bool, error) {
				resp, err := flooder.Get(list)
				if err != nil {
					return false, err
				}
				drain(resp)
				return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID), nil
			})

			var rejected, withoutHeaders atomic.Int64
			var firstRejected atomic.Pointer[time.Time]
			floodCtx, stopFlood := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer func() {
				stopFlood()
				wg.Wait()
			}()
			for range 64 {
				wg.Go(func() {
					for floodCtx.Err() == nil {
						req, _ := http.NewRequestWithContext(floodCtx, http.MethodGet, list, nil)
						resp, err := flooder.Do(req)
						if err != nil {
							continue
						}
						drain(resp)
						if resp.StatusCode != http.StatusTooManyRequests {
							continue
						}
						now := time.Now()
						firstRejected.CompareAndSwap(nil, &now)
						rejected.Add(1)
						if resp.Header.Get("Retry-After") == "" ||
							resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) != string(pl.UID) ||
							resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != string(fs.UID) {
							withoutHeaders.Add(1)
						}
					}
				})
			}
			held := func(ctx context.Context) float64 {
				n, err := scrape.MetricSum(ctx, cs, "wasmplane_apf_held_refusals_total", map[string]string{"priority_level": pl.Name})
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			if tt.hold >= 0 {
				waitfor.Condition(t, time.Minute, "the tenant's refusals to be held", func(ctx context.Context) (bool, error) {
					return held(ctx) > 0, nil
				})
				// Some held 429s have been written since.
				before := rejected.Load()
				waitfor.Condition(t, time.Minute, "more 429s", func(context.Context) (bool, error) { return rejected.Load() > before+64, nil })
			} else {
				// Refused for three seconds: three times what makes a flow's refusals held.
				waitfor.Condition(t, time.Minute, "the tenant to be refused for 3 s", func(context.Context) (bool, error) {
					first := firstRejected.Load()
					return first != nil && time.Since(*first) > 3*time.Second, nil
				})
				if n := held(ctx); n != 0 {
					t.Errorf("with the hold off, %v refusals held", n)
				}
			}
			for i := range 10 {
				bystanderGET(t, other, list, i)
			}
			stopFlood()
			wg.Wait()
			t.Logf("%d refusals, %v of them held", rejected.Load(), held(ctx))
			if n := withoutHeaders.Load(); n > 0 {
				t.Errorf("%d of %d 429s without Retry-After or the schema's and level's UIDs", n, rejected.Load())
			}
		})
	}
}
