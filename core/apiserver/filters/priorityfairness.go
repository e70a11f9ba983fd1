package filters

import (
	"context"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// DefaultRequestWaitLimit is how long a request without a deadline may wait in an APF
// queue (kube-apiserver's default --request-timeout of 60 s divided by four, as the
// library divides a request's own deadline).
const DefaultRequestWaitLimit = 15 * time.Second

// longRunningCheck is kube-apiserver's: watches and proxies by verb, exec, attach, log
// and port forwarding by subresource. The APF filter still queues a watch until it is
// initialized; the others bypass it.
var longRunningCheck = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
	sets.NewString("attach", "exec", "proxy", "log", "portforward"))

// WithPriorityAndFairness is kube-apiserver's API Priority and Fairness filter
// (k8s.io/apiserver's WithPriorityAndFairness over the controller fc): each request is
// classified by the FlowSchemas and waits in its priority level's fair queues for a
// seat, or gets 429 with Retry-After; responses carry the matched schema's and level's
// UIDs. It runs where WithMaxInFlight would, after impersonation, so that requests are
// classified as the user they act as. objectStats counts a resource's objects ("pods",
// "deployments.apps") for the list work estimator, which charges a LIST one seat per
// 100 KB it may go through (up to the level's maximum); nil charges every LIST the
// minimum.
func WithPriorityAndFairness(h http.Handler, fc utilflowcontrol.Interface, objectStats func(string) (storage.Stats, error)) http.Handler {
	if objectStats == nil {
		objectStats = noObjectCounts
	}
	estimator := fcrequest.NewWorkEstimator(objectStats, fc.GetInterestedWatchCount, fcrequest.DefaultWorkEstimatorConfig(), fc.GetMaxSeats)
	apf := genericfilters.WithPriorityAndFairness(h, longRunningCheck, fc, estimator, DefaultRequestWaitLimit)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		apf.ServeHTTP(w, req.WithContext(withGenericRequest(req.Context())))
	})
}

// noObjectCounts answers the list work estimator without counts: "not found" makes a list
// cost the minimum of seats, as kube-apiserver charges a resource whose count it does not
// know.
func noObjectCounts(string) (storage.Stats, error) {
	return storage.Stats{}, fcrequest.ObjectCountNotFoundErr
}

// withGenericRequest copies the request's user and RequestInfo into the context keys
// k8s.io/apiserver's filters read.
func withGenericRequest(ctx context.Context) context.Context {
	if u, ok := UserFrom(ctx); ok {
		ctx = apirequest.WithUser(ctx, &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra})
	}
	if info, ok := RequestInfoFrom(ctx); ok {
		ctx = apirequest.WithRequestInfo(ctx, &apirequest.RequestInfo{
			IsResourceRequest: info.IsResourceRequest, Path: info.Path, Verb: info.Verb,
			APIPrefix: info.APIPrefix, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
			Namespace: info.Namespace, Resource: info.Resource, Subresource: info.Subresource, Name: info.Name, Parts: info.Parts,
		})
	}
	return ctx
}
