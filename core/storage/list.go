package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// maxListBatch bounds one etcd range read so that a list of 150,000 objects does not
	// need one huge gRPC message.
	maxListBatch       = 10000
	continueAPIVersion = "meta.k8s.io/v1"
	// latestContinueRV in a continue token resumes at the latest revision: the token a 410
	// for a compacted revision carries, as kube-apiserver's (-1 rather than 0, which marks a
	// bad token).
	latestContinueRV = -1
)

// continueToken is Kubernetes' continue format: the revision the first page was read at and
// the next key, relative to the listed prefix.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(nextKey, keyPrefix string, rev int64) (string, error) {
	b, err := json.Marshal(continueToken{APIVersion: continueAPIVersion, ResourceVersion: rev,
		StartKey: strings.TrimPrefix(nextKey, keyPrefix)})
	if err != nil {
		return "", fmt.Errorf("storage: continue token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeContinue returns the absolute key to resume at and the revision to read at.
func decodeContinue(token, keyPrefix string) (string, int64, error) {
	bad := func(why string) (string, int64, error) {
		return "", 0, apierrors.NewBadRequest("continue key is not valid: " + why)
	}
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return bad("incorrect encoding")
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return bad("incorrect encoding")
	}
	switch {
	case c.APIVersion != continueAPIVersion:
		return bad("server does not recognize this encoding")
	case c.ResourceVersion == 0 || c.ResourceVersion < latestContinueRV:
		return bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	case c.StartKey == "" || strings.HasPrefix(c.StartKey, "/") || strings.Contains(c.StartKey, ".."):
		return bad("invalid start key")
	}
	if c.ResourceVersion == latestContinueRV {
		return keyPrefix + c.StartKey, 0, nil
	}
	return keyPrefix + c.StartKey, c.ResourceVersion, nil
}

// listPlan is where and at which revision a list reads.
type listPlan struct {
	keyPrefix string
	startKey  string
	withRev   int64 // 0 = latest
	minRV     uint64
	paging    bool
	cont      bool
}

// planList applies Kubernetes' resourceVersion / resourceVersionMatch / continue rules.
func planList(key string, opts ListOptions) (listPlan, error) {
	p := listPlan{keyPrefix: key, startKey: key}
	if opts.Recursive && !strings.HasSuffix(key, "/") {
		p.keyPrefix += "/"
		p.startKey = p.keyPrefix
	}
	p.paging = opts.Recursive && opts.Predicate.Limit > 0
	rv, err := parseRV(opts.ResourceVersion)
	if err != nil {
		return p, err
	}
	switch {
	case opts.Predicate.Continue != "":
		if !opts.Recursive {
			return p, apierrors.NewBadRequest("continue key is not valid: a single object cannot be continued")
		}
		if rv != 0 {
			return p, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		p.startKey, p.withRev, err = decodeContinue(opts.Predicate.Continue, p.keyPrefix)
		p.cont = true
		return p, err
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		if rv == 0 {
			return p, apierrors.NewBadRequest("resourceVersionMatch=Exact requires a non-zero resourceVersion")
		}
		p.withRev = int64(rv)
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan:
		p.minRV = rv
	case opts.ResourceVersionMatch == "":
		// Legacy: a paged list from N reads exactly N, an unpaged one at least N.
		if p.paging && rv > 0 {
			p.withRev = int64(rv)
		} else {
			p.minRV = rv
		}
	default:
		return p, apierrors.NewBadRequest(fmt.Sprintf("unknown resourceVersionMatch %q", opts.ResourceVersionMatch))
	}
	return p, nil
}

// GetList implements Interface.
func (s *Etcd) GetList(ctx context.Context, key string, opts ListOptions, listObj runtime.Object) error {
	listMeta, err := meta.ListAccessor(listObj)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	p, err := planList(key, opts)
	if err != nil {
		return err
	}
	m := newMatcher(opts.Predicate, s.cfg.GetAttrs)
	limit := opts.Predicate.Limit
	batch := int64(maxListBatch)
	if p.paging && limit < batch {
		batch = limit
	}
	var (
		items     []runtime.Object
		lastKey   string
		hasMore   bool
		remaining *int64
		withRev   = p.withRev
		startKey  = p.startKey
	)
fetch:
	for {
		ops := []clientv3.OpOption{clientv3.WithRev(withRev)}
		if opts.Recursive {
			ops = append(ops, clientv3.WithRange(clientv3.GetPrefixRangeEnd(p.keyPrefix)), clientv3.WithLimit(batch))
		}
		resp, err := s.client.Get(ctx, startKey, ops...)
		if err != nil {
			return s.listError(err, p)
		}
		if withRev == 0 {
			// Later batches read at the first one's revision so that the list is consistent.
			withRev = resp.Header.Revision
		}
		for i, kv := range resp.Kvs {
			obj := s.cfg.NewFunc()
			if err := s.decode(string(kv.Key), kv.Value, kv.ModRevision, obj); err != nil {
				return err
			}
			lastKey = string(kv.Key)
			if m.matches(obj) {
				items = append(items, obj)
			}
			if p.paging && int64(len(items)) == limit {
				hasMore = i < len(resp.Kvs)-1 || resp.More
				if hasMore && m.countable {
					n := resp.Count - int64(i) - 1
					remaining = &n
				}
				break fetch
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		startKey = lastKey + "\x00"
		if batch < maxListBatch {
			// Filtering discards objects: read more at a time.
			batch = min(batch*2, maxListBatch)
		}
	}
	if p.minRV > uint64(withRev) {
		return NewTooLargeResourceVersionError(p.minRV, uint64(withRev), 1)
	}
	if err := meta.SetList(listObj, items); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	listMeta.SetResourceVersion(fmt.Sprint(withRev))
	listMeta.SetContinue("")
	listMeta.SetRemainingItemCount(nil)
	if hasMore {
		tok, err := encodeContinue(lastKey+"\x00", p.keyPrefix, withRev)
		if err != nil {
			return err
		}
		listMeta.SetContinue(tok)
		listMeta.SetRemainingItemCount(remaining)
	}
	return nil
}

func (s *Etcd) listError(err error, p listPlan) error {
	switch {
	case isCompacted(err) && p.cont:
		return continueExpired(p)
	case isCompacted(err):
		return apierrors.NewResourceExpired(msgListExpired)
	case isFutureRev(err):
		return NewTooLargeResourceVersionError(uint64(p.withRev), 0, 1)
	}
	return fmt.Errorf("storage: list %s: %w", p.keyPrefix, err)
}

// continueExpired is the 410 for a continue token whose revision is compacted away. It
// carries a token that resumes at the same key at the latest revision, so that a client
// may finish the list inconsistently instead of starting over.
func continueExpired(p listPlan) error {
	tok, err := encodeContinue(p.startKey, p.keyPrefix, latestContinueRV)
	if err != nil {
		return apierrors.NewResourceExpired(msgContinueExpired)
	}
	se := apierrors.NewResourceExpired(msgInconsistentContinue)
	se.ErrStatus.ListMeta.Continue = tok
	return se
}
