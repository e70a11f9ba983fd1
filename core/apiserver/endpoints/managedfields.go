package endpoints

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// managerFor returns the manager a create or update through r is recorded under, after
// checking the fieldManager parameter (kind names the options in a 422).
func managerFor(req *http.Request, kind string) (string, error) {
	fm := req.URL.Query().Get("fieldManager")
	if err := apply.ValidateFieldManager(kind, fm); err != nil {
		return "", err
	}
	return apply.ManagerName(fm, req.UserAgent()), nil
}

// patchOptions reads and checks a PATCH's options for the patch type.
func patchOptions(req *http.Request, pt types.PatchType) (*metav1.PatchOptions, error) {
	q := req.URL.Query()
	opts := &metav1.PatchOptions{FieldManager: q.Get("fieldManager"), FieldValidation: q.Get("fieldValidation"), DryRun: q["dryRun"]}
	if v := q.Get("force"); v != "" {
		force, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("force: invalid value %q: %v", v, err))
		}
		opts.Force = &force
	}
	if err := apply.ValidatePatchOptions(opts, pt); err != nil {
		return nil, err
	}
	opts.FieldManager = apply.ManagerName(opts.FieldManager, req.UserAgent())
	return opts, nil
}

// strategyFor is the strategy a write through r uses.
func (s *Scope) strategyFor(strategy registry.Strategy) registry.Strategy {
	if strategy != nil {
		return strategy
	}
	return s.resource().Strategy
}

// trackUpdate records in obj's managedFields that manager set what differs from live
// (nil live: a create), as an Update operation of r's subresource. pruned says obj is
// the request's object as decodeObject returned it (pruned by the resource's Prune).
func (s *Scope) trackUpdate(r Request, strategy registry.Strategy, live, obj runtime.Object, manager string, pruned bool) runtime.Object {
	fm := s.Fields.For(r.Subresource)
	if fm == nil {
		return obj
	}
	if live == nil {
		live = s.emptyLive()
	}
	// Defaults first, as kube-apiserver decodes with them: the writer owns what it was
	// defaulted to.
	s.defaultDecoded(strategy, obj, pruned)
	return fm.UpdateNoErrors(live, obj, manager)
}

// defaultDecoded applies the strategy's defaults to obj, without pruning it a second time
// when it was just pruned and the strategy can tell.
func (s *Scope) defaultDecoded(strategy registry.Strategy, obj runtime.Object, pruned bool) {
	st := s.strategyFor(strategy)
	if pd, ok := st.(registry.PrunedDefaulter); ok && pruned && s.resource().Prune != nil {
		pd.DefaultPruned(obj)
		return
	}
	st.Default(obj)
}

// emptyLive is the live object of a create for the field managers: empty, of the
// resource's kind (which a custom object knows only from its resource).
func (s *Scope) emptyLive() runtime.Object {
	live := s.resource().NewFunc()
	if u, ok := live.(runtime.Unstructured); ok {
		u.GetObjectKind().SetGroupVersionKind(s.resource().GroupVersionKind())
	}
	return live
}

// keepTimestamps is the store hook that lets an update that changes nothing stay a no-op.
func (s *Scope) keepTimestamps(r Request) func(obj, old runtime.Object) {
	if s.Fields.For(r.Subresource) == nil {
		return nil
	}
	return apply.KeepTimestamps
}

// applyPatch merges an apply patch into live (nil: create by apply) with the field
// manager of r.
func (s *Scope) applyPatch(w http.ResponseWriter, req *http.Request, r Request, live runtime.Object, body []byte, opts *metav1.PatchOptions) (runtime.Object, error) {
	fm := s.Fields.For(r.Subresource)
	if fm == nil {
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", s.resource().GroupResource(), r.Name,
			"server-side apply is not served for "+s.resource().GroupResource().String(), 0, false)
	}
	strict := opts.FieldValidation != metav1.FieldValidationIgnore
	patch, strictErr, err := apply.DecodePatch(body, strict)
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = s.emptyLive()
	}
	force := opts.Force != nil && *opts.Force
	out, err := fm.Apply(live, patch, opts.FieldManager, force)
	if err != nil {
		return nil, err
	}
	if strictErr != nil {
		if opts.FieldValidation == metav1.FieldValidationStrict {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", strictErr))
		}
		addWarning(w, strictErr.Error())
	}
	// The object a create by apply makes must not carry a uid of its own.
	if m, err := meta.Accessor(out); err == nil && m.GetUID() != "" && live != nil {
		if lm, _ := meta.Accessor(live); lm != nil && lm.GetUID() == "" {
			return nil, apierrors.NewConflict(s.resource().GroupResource(), r.Name,
				fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", m.GetUID()))
		}
	}
	return out, nil
}
