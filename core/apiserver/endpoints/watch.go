package endpoints

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
)

// MinWatchTimeout is the shortest server-chosen watch lifetime; Kubernetes picks a random
// duration in [min, 2*min) so that clients do not all rewatch at once.
const MinWatchTimeout = 30 * time.Minute

// Watch streams events as chunked frames in the negotiated encoding.
func (s *Scope) Watch(w http.ResponseWriter, req *http.Request, r Request, opts *metav1.ListOptions) {
	out, err := s.Codecs.NegotiateOutput(req)
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	if out.Info.MediaType == runtime.ContentTypeProtobuf && out.As == "" && !SupportsProtobuf(s.resource().NewFunc()) {
		out.Info = s.Codecs.JSON()
	}
	if out.Info.StreamSerializer == nil {
		s.Codecs.WriteError(w, req, apierrors.NewBadRequest("no stream serializer for "+out.Info.MediaType))
		return
	}
	timeout, err := watchTimeout(opts.TimeoutSeconds)
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	wi, err := s.Store.Watch(ctx, r.Namespace, opts)
	if err != nil {
		s.Codecs.WriteError(w, req, err)
		return
	}
	defer wi.Stop()
	// The watch is established: API Priority and Fairness releases its seat now, as
	// kube-apiserver's watch cache signals once a watcher is registered.
	utilflowcontrol.WatchInitialized(req.Context())
	flusher, _ := w.(http.Flusher)
	mediaType := out.Info.MediaType
	if mediaType != runtime.ContentTypeJSON {
		mediaType += ";stream=watch"
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	ss := out.Info.StreamSerializer
	enc := streaming.NewEncoder(ss.Framer.NewFrameWriter(w), ss.Serializer)
	objEnc := s.Codecs.Factory.EncoderForVersion(out.Info.Serializer, s.gv())
	metaEnc := s.Codecs.Factory.EncoderForVersion(out.Info.Serializer, metav1.SchemeGroupVersion)
	var buf bytes.Buffer
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			buf.Reset()
			obj := ev.Object
			e := objEnc
			switch {
			case ev.Type == watch.Error:
				e = metaEnc
			case out.As == "Table":
				t, err := s.watchTable(obj, req, first && ev.Type != watch.Bookmark)
				if err != nil {
					return
				}
				if ev.Type != watch.Bookmark {
					first = false
				}
				obj, e = t, metaEnc
			case out.As != "":
				pom, err := partialMetadata(unwrap(obj), s.resource().GroupVersionKind())
				if err != nil {
					return
				}
				obj, e = pom, metaEnc
			}
			if err := e.Encode(obj, &buf); err != nil {
				return
			}
			we := &metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: buf.Bytes()}}
			if err := enc.Encode(we); err != nil {
				return
			}
			if flusher != nil && len(wi.ResultChan()) == 0 {
				flusher.Flush()
			}
		}
	}
}

// watchTimeout is how long a watch lasts: timeoutSeconds when positive; when absent or
// 0, as Kubernetes, a random duration in [MinWatchTimeout, 2*MinWatchTimeout) so that
// clients do not all rewatch at once. A negative timeoutSeconds is refused with 400.
func watchTimeout(seconds *int64) (time.Duration, error) {
	if seconds != nil && *seconds < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("timeoutSeconds must be zero or positive, got %d", *seconds))
	}
	if seconds != nil && *seconds > 0 {
		// Clamped so that a huge value cannot overflow into an expired deadline.
		return time.Duration(min(*seconds, int64(math.MaxInt64/time.Second))) * time.Second, nil
	}
	return MinWatchTimeout + time.Duration(rand.Int64N(int64(MinWatchTimeout))), nil
}

func (s *Scope) watchTable(obj runtime.Object, req *http.Request, withColumns bool) (runtime.Object, error) {
	obj = unwrap(obj)
	opts := &metav1.TableOptions{}
	if err := s.Codecs.DecodeParams(req.URL.Query(), opts); err != nil {
		return nil, err
	}
	return s.Table(obj, opts, withColumns)
}

// unwrap returns the object inside a cache wrapper.
func unwrap(obj runtime.Object) runtime.Object {
	if co, ok := obj.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return obj
}
