package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// DefaultBookmarkInterval is how often a watch that allows bookmarks gets one at the latest.
const DefaultBookmarkInterval = time.Minute

// Etcd is an Interface that reads and writes etcd directly; every call is a round trip.
type Etcd struct {
	client           *clientv3.Client
	cfg              ResourceConfig
	bookmarkInterval time.Duration
	log              *slog.Logger
}

// EtcdOption tunes an Etcd store.
type EtcdOption func(*Etcd)

// WithBookmarkInterval sets how often watches that allow bookmarks receive one.
func WithBookmarkInterval(d time.Duration) EtcdOption {
	return func(s *Etcd) { s.bookmarkInterval = d }
}

// WithLogger sets the logger of the store; the default discards.
func WithLogger(l *slog.Logger) EtcdOption {
	return func(s *Etcd) { s.log = l }
}

var _ Interface = (*Etcd)(nil)

// NewEtcd returns a store of one resource on client. cfg.Codec, cfg.NewFunc and
// cfg.NewListFunc are required.
func NewEtcd(client *clientv3.Client, cfg ResourceConfig, opts ...EtcdOption) *Etcd {
	s := &Etcd{client: client, cfg: cfg, bookmarkInterval: DefaultBookmarkInterval, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Client is the etcd client the store uses.
func (s *Etcd) Client() *clientv3.Client { return s.client }

// Config is the resource configuration of the store.
func (s *Etcd) Config() ResourceConfig { return s.cfg }

// objState is a decoded stored object together with the bytes and revision it came from.
type objState struct {
	obj    runtime.Object
	data   []byte
	rev    int64
	exists bool
}

func setRV(obj runtime.Object, rev int64) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	m.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// decode reads data into into (reset first, so nothing of its old state survives) and sets
// its resourceVersion to rev.
func (s *Etcd) decode(key string, data []byte, rev int64, into runtime.Object) error {
	if err := runtime.SetZeroValue(into); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if _, _, err := s.cfg.Codec.Decode(data, nil, into); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("decoding %s: %w", key, err))
	}
	return setRV(into, rev)
}

func (s *Etcd) encode(obj runtime.Object) ([]byte, error) {
	data, _, err := s.encodeExact(obj)
	return data, err
}

// encodeExact is encode, and also reports whether obj's content is exactly what decoding
// the bytes gives back, as far as the storage codec can tell while writing them (false
// for any other codec).
func (s *Etcd) encodeExact(obj runtime.Object) (data []byte, exact bool, err error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, false, fmt.Errorf("storage: %w", err)
	}
	// The revision is the resourceVersion; storing it would make every write differ.
	m.SetResourceVersion("")
	var buf bytes.Buffer
	if c, ok := s.cfg.Codec.(*codec); ok {
		exact, err = c.encode(obj, &buf)
	} else {
		err = s.cfg.Codec.Encode(obj, &buf)
	}
	if err != nil {
		return nil, false, fmt.Errorf("storage: encoding: %w", err)
	}
	return buf.Bytes(), exact, nil
}

func (s *Etcd) state(key string, kvs []*mvccpb.KeyValue) (*objState, error) {
	st := &objState{obj: s.cfg.NewFunc()}
	if len(kvs) == 0 {
		return st, nil
	}
	kv := kvs[0]
	st.data, st.rev, st.exists = kv.Value, kv.ModRevision, true
	if err := s.decode(key, kv.Value, kv.ModRevision, st.obj); err != nil {
		return nil, err
	}
	return st, nil
}

// Create implements Interface.
func (s *Etcd) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	return s.create(ctx, key, obj, out, nil)
}

// create is Create, calling before (if not nil) with the bytes to be written, and whether
// decoding them gives obj back exactly, before writing them.
func (s *Etcd) create(ctx context.Context, key string, obj, out runtime.Object, before func(data []byte, exact bool)) error {
	data, exact, err := s.encodeExact(obj)
	if err != nil {
		return err
	}
	if before != nil {
		before(data, exact)
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return writeError(s.cfg.GroupResource, "create", key, len(data), err)
	}
	if !resp.Succeeded {
		return apierrors.NewAlreadyExists(s.cfg.GroupResource, nameOf(key))
	}
	if out == nil {
		return nil
	}
	// The caller has the object just written: copy it rather than decode its bytes. When
	// out is obj itself and writing the bytes found its content exact, it already is what
	// decoding them gives, and copyWritten's walk would change nothing.
	if exact && out == obj && gvkExact(obj) {
		if w := writtenFrom(ctx); w != nil && resultKept(ctx) {
			// Nobody changes out from here on: its answer may be written from data.
			w.obj, w.data, w.rev = out, data, resp.Header.Revision
		}
		return setRV(out, resp.Header.Revision)
	}
	if copyWritten(obj, out) {
		return setRV(out, resp.Header.Revision)
	}
	return s.decode(key, data, resp.Header.Revision, out)
}

// Get implements Interface.
func (s *Etcd) Get(ctx context.Context, key string, opts GetOptions, out runtime.Object) error {
	minRV, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("storage: get %s: %w", key, err)
	}
	if minRV > uint64(resp.Header.Revision) {
		return NewTooLargeResourceVersionError(minRV, uint64(resp.Header.Revision), 1)
	}
	if len(resp.Kvs) == 0 {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return errNotFound(s.cfg.GroupResource, key)
	}
	return s.decode(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision, out)
}

func (s *Etcd) checkPreconditions(key string, p *Preconditions, obj runtime.Object) error {
	if p == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return errConflict(s.cfg.GroupResource, key,
			fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return errConflict(s.cfg.GroupResource, key,
			fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v",
				*p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// GuaranteedUpdate implements Interface.
func (s *Etcd) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *Preconditions, tryUpdate UpdateFunc) error {
	return s.guaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, nil)
}

// guaranteedUpdate starts from hint (a possibly stale state, e.g. from the watch cache)
// when given, which saves a read when it is current. Whatever fails on a state that is
// not known to be current is retried on a fresh read before it is reported.
func (s *Etcd) guaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *Preconditions, tryUpdate UpdateFunc, hint *objState) error {
	st, current := hint, false
	refresh := func() error {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("storage: update %s: %w", key, err)
		}
		st, err = s.state(key, resp.Kvs)
		current = true
		return err
	}
	if st == nil {
		if err := refresh(); err != nil {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("storage: update %s: %w", key, err)
		}
		ret, err := s.updateOnce(key, st, ignoreNotFound, preconditions, tryUpdate)
		if err != nil || ret == nil {
			if !current {
				if err := refresh(); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			// Nothing changed: no write, no new revision (as Kubernetes).
			return s.decode(key, st.data, st.rev, destination)
		}
		data := ret
		tresp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", st.rev)).
			Then(clientv3.OpPut(key, string(data))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return writeError(s.cfg.GroupResource, "update", key, len(data), err)
		}
		if !tresp.Succeeded {
			st, err = s.state(key, tresp.Responses[0].GetResponseRange().Kvs)
			if err != nil {
				return err
			}
			current = true
			continue
		}
		return s.decode(key, data, tresp.Header.Revision, destination)
	}
}

// updateOnce runs the checks and tryUpdate on st and returns the bytes to write, or nil
// when nothing changed.
func (s *Etcd) updateOnce(key string, st *objState, ignoreNotFound bool, preconditions *Preconditions,
	tryUpdate UpdateFunc) ([]byte, error) {
	if !st.exists && !ignoreNotFound {
		return nil, errNotFound(s.cfg.GroupResource, key)
	}
	if st.exists {
		if err := s.checkPreconditions(key, preconditions, st.obj); err != nil {
			return nil, err
		}
	}
	// st is not used again after tryUpdate (a retry always has a new state), so tryUpdate
	// may have st.obj.
	ret, err := tryUpdate(st.obj, ResponseMeta{ResourceVersion: uint64(st.rev)})
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(ret)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	// An update that names a resourceVersion must be based on the stored one.
	if rv := m.GetResourceVersion(); rv != "" && st.exists && rv != strconv.FormatInt(st.rev, 10) {
		return nil, errConflict(s.cfg.GroupResource, key, OptimisticLockErrorMsg)
	}
	data, err := s.encode(ret)
	if err != nil {
		return nil, err
	}
	if st.exists && bytes.Equal(data, st.data) {
		return nil, nil
	}
	return data, nil
}

// Delete implements Interface.
func (s *Etcd) Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions,
	validate ValidateObjectFunc) error {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("storage: delete %s: %w", key, err)
	}
	st, err := s.state(key, resp.Kvs)
	if err != nil {
		return err
	}
	for {
		if !st.exists {
			return errNotFound(s.cfg.GroupResource, key)
		}
		if err := s.checkPreconditions(key, preconditions, st.obj); err != nil {
			return err
		}
		if validate != nil {
			if err := validate(ctx, st.obj); err != nil {
				return err
			}
		}
		tresp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", st.rev)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return fmt.Errorf("storage: delete %s: %w", key, err)
		}
		if !tresp.Succeeded {
			st, err = s.state(key, tresp.Responses[0].GetResponseRange().Kvs)
			if err != nil {
				return err
			}
			continue
		}
		if out == nil {
			return nil
		}
		// The last state, stamped with the revision of the deletion (as Kubernetes).
		return s.decode(key, st.data, tresp.Header.Revision, out)
	}
}

// CurrentResourceVersion implements Interface: etcd's current revision.
func (s *Etcd) CurrentResourceVersion(ctx context.Context) (uint64, error) {
	resp, err := s.client.Get(ctx, s.cfg.Prefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("storage: current revision: %w", err)
	}
	return uint64(resp.Header.Revision), nil
}

// parseRV reads a resourceVersion; "" and "0" are 0.
func parseRV(rv string) (uint64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rv))
	}
	return n, nil
}

func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

func isFutureRev(err error) bool { return errors.Is(err, rpctypes.ErrFutureRev) }
