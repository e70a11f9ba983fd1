package policy

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// rediscoverEvery bounds how often a kind the mapper does not know sends it back to
// discovery: a policy whose paramKind names no served kind is retried every second.
const rediscoverEvery = time.Second

// refreshingMapper maps a paramKind to its resource through the server's discovery. A
// kind it does not know (a custom resource defined after the last discovery) makes it
// discover again, at most once per rediscoverEvery, so that a policy whose param is a
// new custom resource works without waiting for a periodic refresh.
type refreshingMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper

	mu   sync.Mutex
	last time.Time
}

func newRefreshingMapper(d discovery.DiscoveryInterface) *refreshingMapper {
	return &refreshingMapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))}
}

// rediscover resets the discovery cache unless that was done very recently.
func (m *refreshingMapper) rediscover() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.last) < rediscoverEvery {
		return false
	}
	m.last = time.Now()
	m.Reset()
	return true
}

// RESTMapping implements meta.RESTMapper.
func (m *refreshingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if err != nil && meta.IsNoMatchError(err) && m.rediscover() {
		return m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	}
	return mapping, err
}

// RESTMappings implements meta.RESTMapper.
func (m *refreshingMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mappings, err := m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	if err != nil && meta.IsNoMatchError(err) && m.rediscover() {
		return m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	}
	return mappings, err
}
