// Package pleg is the pod lifecycle event generator: it relists the runtime's sandboxes
// and containers every period and, where the runtime offers it, follows the CRI container
// event stream, telling the kubelet which pods changed.
package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LabelPodUID is the sandbox and container label that names the pod.
const LabelPodUID = "io.kubernetes.pod.uid"

// How long followEvents waits before asking for the event stream again: after the stream
// ended, and after a runtime said it has none.
const (
	eventRetry              = 5 * time.Second
	unimplementedEventRetry = 5 * time.Minute
)

// PLEG watches a runtime for pod changes.
type PLEG struct {
	runtime  cri.RuntimeService
	period   time.Duration
	onChange func(uid types.UID)
	log      *slog.Logger
	last     map[types.UID]string
}

// New returns a PLEG that relists every period (default 1 s) and calls onChange for
// every pod whose runtime state changed.
func New(runtime cri.RuntimeService, period time.Duration, onChange func(types.UID), log *slog.Logger) *PLEG {
	if period <= 0 {
		period = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PLEG{runtime: runtime, period: period, onChange: onChange, log: log, last: map[types.UID]string{}}
}

// Run relists and follows events until ctx ends.
func (p *PLEG) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.followEvents(ctx)
	}()
	t := time.NewTicker(p.period)
	defer t.Stop()
	for {
		if err := p.Relist(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("relist failed", "err", err)
		}
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
	}
}

// Relist compares the runtime with the previous relist and reports changed pods.
func (p *PLEG) Relist(ctx context.Context) error {
	sbs, err := p.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing sandboxes: %w", err)
	}
	cts, err := p.runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	parts := map[types.UID][]string{}
	for _, sb := range sbs {
		uid := types.UID(sb.GetLabels()[LabelPodUID])
		if uid == "" {
			uid = types.UID(sb.GetMetadata().GetUid())
		}
		parts[uid] = append(parts[uid], "s"+sb.GetId()+"="+sb.GetState().String())
	}
	for _, c := range cts {
		uid := types.UID(c.GetLabels()[LabelPodUID])
		parts[uid] = append(parts[uid], "c"+c.GetId()+"="+c.GetState().String())
	}
	now := map[types.UID]string{}
	for uid, ps := range parts {
		slices.Sort(ps)
		now[uid] = strings.Join(ps, ",")
	}
	var changed []types.UID
	for uid, fp := range now {
		if p.last[uid] != fp {
			changed = append(changed, uid)
		}
	}
	for uid := range p.last {
		if _, ok := now[uid]; !ok {
			changed = append(changed, uid)
		}
	}
	p.last = now
	for _, uid := range changed {
		if uid != "" {
			p.onChange(uid)
		}
	}
	return nil
}

// followEvents consumes GetContainerEvents; a runtime without it leaves the relist alone.
func (p *PLEG) followEvents(ctx context.Context) {
	for ctx.Err() == nil {
		ch := make(chan *runtimeapi.ContainerEventResponse, 64)
		errc := make(chan error, 1)
		streamCtx, cancel := context.WithCancel(ctx)
		go func() { errc <- p.runtime.GetContainerEvents(streamCtx, ch, nil) }()
		var err error
	loop:
		for {
			select {
			case ev := <-ch:
				uid := types.UID(ev.GetPodSandboxStatus().GetLabels()[LabelPodUID])
				if uid == "" {
					uid = types.UID(ev.GetPodSandboxStatus().GetMetadata().GetUid())
				}
				for _, cs := range ev.GetContainersStatuses() {
					if uid == "" {
						uid = types.UID(cs.GetLabels()[LabelPodUID])
					}
				}
				if uid != "" {
					p.onChange(uid)
				}
			case err = <-errc:
				break loop
			case <-ctx.Done():
				cancel()
				<-errc
				return
			}
		}
		cancel()
		retry := eventRetry
		if status.Code(err) == codes.Unimplemented {
			// containerd 1.6 has no event stream: the relist alone follows it, and asking
			// every few seconds only fills the log with the client's errors.
			p.log.Debug("the runtime has no container event stream; relisting only", "err", err)
			retry = unimplementedEventRetry
		} else if err != nil {
			p.log.Debug("container event stream ended", "err", err)
		}
		// Retry later: the runtime may have restarted, or been upgraded to one with events.
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
