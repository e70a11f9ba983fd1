package filters

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"sort"
	"time"

	"github.com/wasmplane/wasmplane/core/authz"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// impersonationTTL is how long an allowed impersonation is remembered: kube-apiserver's
// (its constrained impersonation caches successes for as long as a token's success).
// A revoked permission to impersonate stops working within this time.
const impersonationTTL = 10 * time.Second

// impersonationCache remembers allowed impersonations, so that a client impersonating
// the same user for the same kind of request thousands of times a second (a flood the
// server will mostly refuse) pays for the authorization checks once every TTL. Refusals
// are not remembered.
type impersonationCache struct {
	entries *cache.Expiring
}

// impersonated is a remembered outcome: the user the request runs as and the verb that
// allowed it.
type impersonated struct {
	user *User
	mode string
}

func newImpersonationCache(c clock.Clock) *impersonationCache {
	return &impersonationCache{entries: cache.NewExpiringWithClock(c)}
}

// get returns the outcome remembered for key, with a user the caller may modify.
func (c *impersonationCache) get(key string) (*User, string, bool) {
	v, ok := c.entries.Get(key)
	if !ok {
		return nil, "", false
	}
	e := v.(impersonated)
	u := *e.user
	u.Groups = slices.Clone(u.Groups)
	return &u, e.mode, true
}

func (c *impersonationCache) set(key string, u *User, mode string) {
	cp := *u
	cp.Groups = slices.Clone(u.Groups)
	c.entries.Set(key, impersonated{user: &cp, mode: mode}, impersonationTTL)
}

// impersonationKey is a digest of everything the checks read: the requester, the
// wanted user and the request's attributes (constrained impersonation authorizes the
// request's own verb and resource). Each field is written with its length, so that
// different inputs never write the same bytes; the digest keeps the cache's entries
// small whatever the size of the names.
func impersonationKey(requester, wanted *User, attrs authz.Attributes) string {
	h := sha256.New()
	writeUser(h, requester)
	writeUser(h, wanted)
	resource := "0"
	if attrs.ResourceRequest {
		resource = "1"
	}
	for _, s := range []string{attrs.Verb, resource, attrs.APIGroup, attrs.APIVersion, attrs.Resource, attrs.Subresource,
		attrs.Namespace, attrs.Name, attrs.Path} {
		writeField(h, s)
	}
	return string(h.Sum(nil))
}

func writeUser(h hash.Hash, u *User) {
	writeField(h, u.Name)
	writeField(h, u.UID)
	writeCount(h, len(u.Groups))
	for _, g := range u.Groups {
		writeField(h, g)
	}
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	writeCount(h, len(keys))
	for _, k := range keys {
		writeField(h, k)
		writeCount(h, len(u.Extra[k]))
		for _, v := range u.Extra[k] {
			writeField(h, v)
		}
	}
}

func writeField(h hash.Hash, s string) {
	writeCount(h, len(s))
	_, _ = h.Write([]byte(s))
}

func writeCount(h hash.Hash, n int) {
	var b [binary.MaxVarintLen64]byte
	_, _ = h.Write(b[:binary.PutUvarint(b[:], uint64(n))])
}
