package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// MaxJSONPatchOperations bounds a JSON patch, as Kubernetes does.
const MaxJSONPatchOperations = 10000

// Patch serves PATCH on one object (or its status with strategy set); an apply patch
// of a missing object creates it.
func (s *Scope) Patch(w http.ResponseWriter, req *http.Request, r Request, strategy registry.Strategy) {
	var created bool
	s.serveCode(w, req, func(ctx context.Context) (runtime.Object, int, error) {
		ct := req.Header.Get("Content-Type")
		mt, _, _ := mime.ParseMediaType(ct)
		pt := types.PatchType(mt)
		_, unstructuredObj := s.Store.Resource.NewFunc().(runtime.Unstructured)
		switch {
		case pt == types.StrategicMergePatchType && unstructuredObj:
			// A strategic merge patch needs Go struct tags a custom resource has not.
			return nil, 0, unsupportedMediaType(ct, []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)})
		case pt == types.JSONPatchType, pt == types.MergePatchType, pt == types.StrategicMergePatchType, apply.IsApply(pt):
		default:
			return nil, 0, unsupportedMediaType(ct, []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)})
		}
		patch, err := s.readBody(req)
		if err != nil {
			return nil, 0, err
		}
		popts, err := patchOptions(req, pt)
		if err != nil {
			return nil, 0, err
		}
		wopts, err := s.writeOptionsFor(req, r)
		if err != nil {
			return nil, 0, err
		}
		jsonInfo := s.Codecs.JSON()
		enc := s.Codecs.Factory.EncoderForVersion(jsonInfo.Serializer, s.gv())
		var out runtime.Object
		out, created, err = s.Store.Update(ctx, r.Namespace, r.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
			if apply.IsApply(pt) {
				return s.applyPatch(w, req, r, existing, patch, popts)
			}
			if existing == nil {
				return nil, apierrors.NewNotFound(s.Store.Resource.GroupResource(), r.Name)
			}
			original, err := runtime.Encode(enc, existing.DeepCopyObject())
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			patched, err := applyPatch(pt, original, patch, s.Store.Resource.NewFunc())
			if err != nil {
				return nil, err
			}
			jreq := req.Clone(ctx)
			jreq.Header.Set("Content-Type", "application/json")
			obj, err := s.decodeObject(w, jreq, patched, s.resource().GroupVersionKind(), nil)
			if err != nil {
				return nil, err
			}
			return s.trackUpdate(r, strategy, existing, obj, popts.FieldManager, false), nil
		}, registry.UpdateOptions{WriteOptions: wopts, Strategy: strategy, AllowUnconditional: true,
			// Apply creates a missing object, on the object's endpoint only (as Kubernetes).
			AllowCreate: apply.IsApply(pt) && strategy == nil,
			BeforeWrite: s.keepTimestamps(r)})
		code := http.StatusOK
		if created {
			code = http.StatusCreated
		}
		return out, code, err
	})
}

// applyPatch applies one patch document of type pt to the JSON of an object.
func applyPatch(pt types.PatchType, original, patch []byte, dataStruct runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > MaxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(ops)))
		}
		out, err := ops.Apply(original)
		if err != nil {
			return nil, jsonPatchFailed(ops, err)
		}
		return out, nil
	case types.MergePatchType:
		if !json.Valid(patch) {
			return nil, apierrors.NewBadRequest("the patch is not valid JSON")
		}
		out, err := jsonpatch.MergePatch(original, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	default:
		var pm map[string]any
		if err := json.Unmarshal(patch, &pm); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		out, err := strategicpatch.StrategicMergePatch(original, patch, dataStruct)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schemaGR(), "", err.Error(), 0, false)
		}
		return out, nil
	}
}

// jsonPatchFailed is the 422 of a JSON patch that does not apply. The message is
// Kubernetes' (generic); the library's error, which names the failing operation's path
// ("testing value /metadata/labels/a failed: test failed"), goes in a cause, with the
// path as its field when a test operation failed, so that clients can tell which.
func jsonPatchFailed(ops jsonpatch.Patch, err error) error {
	st := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schemaGR(), "", err.Error(), 0, false)
	cause := metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Message: err.Error()}
	msg := err.Error()
	for _, op := range ops {
		p, perr := op.Path()
		if op.Kind() != "test" || perr != nil {
			continue
		}
		if strings.Contains(msg, "testing value "+p+" failed") || strings.Contains(msg, "is missing path: "+p+":") || strings.Contains(msg, "for path: '"+p+"'") {
			cause.Field = p
			break
		}
	}
	st.ErrStatus.Details.Causes = []metav1.StatusCause{cause}
	return st
}

// PatchBody reads a PATCH request's type and body, refusing types other than JSON, merge
// and strategic merge patches (for subresources that patch a derived object).
func (s *Scope) PatchBody(req *http.Request) (types.PatchType, []byte, error) {
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	pt := types.PatchType(mt)
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
	default:
		return "", nil, unsupportedMediaType(req.Header.Get("Content-Type"), []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType)})
	}
	body, err := s.readBody(req)
	return pt, body, err
}

// ApplyPatch applies a patch of type pt to the JSON of an object; dataStruct is an empty
// object of the patched type (for strategic merge patch keys).
func ApplyPatch(pt types.PatchType, original, patch []byte, dataStruct runtime.Object) ([]byte, error) {
	return applyPatch(pt, original, patch, dataStruct)
}
