package storage

import (
	"errors"
	"fmt"
	"path"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OptimisticLockErrorMsg is Kubernetes' message for a write based on a stale object.
const OptimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// nameOf is the object name of a key: its last segment.
func nameOf(key string) string { return path.Base(key) }

func errNotFound(gr schema.GroupResource, key string) error {
	return apierrors.NewNotFound(gr, nameOf(key))
}

func errConflict(gr schema.GroupResource, key, msg string) error {
	return apierrors.NewConflict(gr, nameOf(key), fmt.Errorf("%s", msg))
}

// NewTooLargeResourceVersionError is the 504 Kubernetes returns when a client asks for a
// revision the store has not reached; client-go recognizes it by its cause.
func NewTooLargeResourceVersionError(want, current uint64, retrySeconds int) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), retrySeconds)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// errTooOldRV is the 410 a watch from a revision no longer available gets.
func errTooOldRV(want, oldest uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", want, oldest))
}

const (
	msgContinueExpired = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
	msgListExpired     = "The resourceVersion for the provided list is too old."
	// msgInconsistentContinue goes with a 410 that carries a token to resume at the
	// latest revision; kube-apiserver's words.
	msgInconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)

// writeError wraps a failed write to etcd. An object etcd refuses for its size gets the
// 413 a too-large request body gets, with the size and the reason: kube-apiserver answers
// it with a bare 500, which clients retry although no retry can succeed.
func writeError(gr schema.GroupResource, op, key string, size int, err error) error {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"%s %q is %d bytes when stored, more than the storage accepts in one write (%v)",
			gr.String(), nameOf(key), size, err))
	}
	return fmt.Errorf("storage: %s %s: %w", op, key, err)
}
