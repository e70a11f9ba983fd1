package filters

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/wasmplane/wasmplane/core/authz"
	"github.com/wasmplane/wasmplane/core/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AttributesFrom builds the authorization attributes of a request from its user and
// RequestInfo (parsed here when no WithRequestInfo filter ran before).
func AttributesFrom(req *http.Request) authz.Attributes {
	info, ok := RequestInfoFrom(req.Context())
	if !ok {
		info = NewRequestInfo(req)
	}
	u, _ := UserFrom(req.Context())
	return authz.Attributes{
		User: u, Verb: info.Verb, ResourceRequest: info.IsResourceRequest,
		APIGroup: info.APIGroup, APIVersion: info.APIVersion, Resource: info.Resource, Subresource: info.Subresource,
		Namespace: info.Namespace, Name: info.Name, Path: info.Path,
	}
}

// WithAuthorization is the seed's withAuthorization: the request goes on only if a allows
// it; otherwise the client gets Kubernetes' 403 Forbidden Status, e.g.
// `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the
// namespace "b"`, or a 500 when the authorizer failed without deciding.
func WithAuthorization(h http.Handler, a authz.Authorizer, writeErr ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		attrs := AttributesFrom(req)
		start := time.Now()
		decision, reason, err := a.Authorize(req.Context(), attrs)
		trace.From(req.Context()).Add(start, "authorization", attrs.Verb+" "+attrs.Resource, decision.String(), reason)
		if decision == authz.DecisionAllow {
			h.ServeHTTP(w, req)
			return
		}
		if err != nil {
			writeErr(w, req, apierrors.NewInternalError(fmt.Errorf("authorizing the request: %w", err)))
			return
		}
		user := ""
		if attrs.User != nil {
			user = attrs.User.Name
		}
		slog.Debug("forbidden", "user", user, "verb", attrs.Verb, "resource", attrs.Resource, "subresource", attrs.Subresource,
			"namespace", attrs.Namespace, "name", attrs.Name, "path", attrs.Path, "reason", reason)
		writeErr(w, req, ForbiddenError(attrs, reason))
	})
}

// ForbiddenMessage words a refusal as Kubernetes does.
func ForbiddenMessage(a authz.Attributes) string {
	user := ""
	if a.User != nil {
		user = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", user, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", user, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", user, a.Verb, resource, a.APIGroup)
}

// ForbiddenError is the 403 Status error for a refused request, with details (name,
// group, kind = the resource) filled as Kubernetes fills them.
func ForbiddenError(a authz.Attributes, reason string) error {
	msg := ForbiddenMessage(a)
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, fmt.Errorf("%s", msg))
}
