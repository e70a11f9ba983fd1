package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	apistorage "k8s.io/apiserver/pkg/storage"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// objectStatser is a store that counts its objects: the watch cache.
type objectStatser interface {
	Stats() (count, averageSize int64, ok bool)
}

// objectStats answers API Priority and Fairness' list work estimator for a group
// resource ("configmaps", "deployments.apps"): how many objects a LIST of it may go
// through and their average size, from the watch cache, so that a LIST costs seats by
// its size as kube-apiserver charges it. A resource served without a watch cache, or not
// served here (an aggregated API), is "not found", which the estimator charges the
// minimum of seats, as kube-apiserver does.
func (s *Server) objectStats(key string) (apistorage.Stats, error) {
	st := s.Store(schema.ParseGroupResource(key))
	if st == nil {
		return apistorage.Stats{}, fcrequest.ObjectCountNotFoundErr
	}
	c, ok := st.Storage.(objectStatser)
	if !ok {
		return apistorage.Stats{}, fcrequest.ObjectCountNotFoundErr
	}
	count, size, ok := c.Stats()
	if !ok {
		return apistorage.Stats{}, fcrequest.ObjectCountNotFoundErr
	}
	return apistorage.Stats{ObjectCount: count, EstimatedAverageObjectSizeBytes: size}, nil
}
