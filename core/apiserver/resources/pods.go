package resources

import (
	"context"
	"fmt"
	"github.com/wasmplane/wasmplane/core/apiserver/apply"
	"net/http"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func podResource() *registry.Resource {
	return &registry.Resource{
		AllowUnconditionalUpdate: true, Traced: true, GroupVersion: corev1.SchemeGroupVersion, Name: "pods", SingularName: "pod", Kind: "Pod", ListKind: "PodList",
		ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true,
		NewFunc:     func() runtime.Object { return &corev1.Pod{} },
		NewListFunc: func() runtime.Object { return &corev1.PodList{} },
		Strategy: &strategy{
			defaults: func(obj runtime.Object) { defaultPodSpec(&obj.(*corev1.Pod).Spec) },
			prepareCreate: func(obj runtime.Object) {
				pod := obj.(*corev1.Pod)
				pod.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podQOS(&pod.Spec)}
			},
			prepareUpdate: func(obj, old runtime.Object) { obj.(*corev1.Pod).Status = old.(*corev1.Pod).Status },
			validate: func(obj runtime.Object) field.ErrorList {
				return validatePodSpec(&obj.(*corev1.Pod).Spec, field.NewPath("spec"))
			},
			validateCreate: func(obj runtime.Object) field.ErrorList { return validatePodCreate(obj.(*corev1.Pod)) },
			validateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return validatePodSpecUpdate(&obj.(*corev1.Pod).Spec, &old.(*corev1.Pod).Spec, field.NewPath("spec"))
			},
			validateOnUpdate: true,
		},
		StatusStrategy: podStatusOnly(),
		ResetFields: apply.StatusResetFields(map[string][]fieldpath.Path{apply.Status: {
			fieldpath.MakePathOrDie("metadata", "deletionTimestamp"), fieldpath.MakePathOrDie("metadata", "ownerReferences")}}),
		GetAttrs: func(obj runtime.Object) (labels.Set, fields.Set, error) {
			p := obj.(*corev1.Pod)
			return labels.Set(p.Labels), podFields(p), nil
		},
		FieldLabels: []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
			"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
		Printer:        podPrinter(),
		GracefulDelete: podGracePeriod,
	}
}

func podFields(p *corev1.Pod) fields.Set {
	f := fields.Set{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace,
		"spec.nodeName": p.Spec.NodeName, "spec.restartPolicy": string(p.Spec.RestartPolicy),
		"spec.schedulerName": p.Spec.SchedulerName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
		"spec.hostNetwork": strconv.FormatBool(p.Spec.HostNetwork), "status.phase": string(p.Status.Phase),
		"status.podIP": p.Status.PodIP, "status.nominatedNodeName": p.Status.NominatedNodeName,
	}
	ips := make([]string, 0, len(p.Status.PodIPs))
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	f["status.podIPs"] = strings.Join(ips, ",")
	return f
}

// podGracePeriod is Kubernetes' rule: a pod that never reached a node, or has finished,
// goes at once; otherwise the kubelet gets the grace period to stop it.
func podGracePeriod(obj runtime.Object, opts *metav1.DeleteOptions) int64 {
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return *opts.GracePeriodSeconds
	}
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		return *g
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

func podSubresources(s *endpoints.Scope) []endpoints.Subresource {
	return []endpoints.Subresource{
		endpoints.StatusSubresource(s, podStatusOnly()),
		ephemeralContainersSubresource(s),
		{Name: "binding", Kind: corev1.SchemeGroupVersion.WithKind("Binding"), Handlers: map[string]endpoints.HandlerFunc{http.MethodPost: bindHandler(s)}},
		{Name: "log", Handlers: map[string]endpoints.HandlerFunc{http.MethodGet: logHandler(s)}},
		{Name: "trace", Handlers: map[string]endpoints.HandlerFunc{http.MethodGet: traceHandler(s), http.MethodPost: traceReportHandler(s)}},
	}
}

// bindHandler assigns a pod to a node (the scheduler's pods/binding).
func bindHandler(s *endpoints.Scope) endpoints.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request, r endpoints.Request) {
		s.Custom(w, req, http.StatusCreated, func(ctx context.Context, body func(into runtime.Object) error) (runtime.Object, error) {
			b := &corev1.Binding{}
			if err := body(b); err != nil {
				return nil, err
			}
			if b.Name != "" && b.Name != r.Name {
				return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
			}
			if b.Target.Name == "" {
				return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), r.Name,
					field.ErrorList{field.Required(field.NewPath("target", "name"), "")})
			}
			// The scheduler's summary goes to the pod's trace, not onto the pod.
			summary, hasSummary := b.Annotations[TraceSchedulingAnnotation]
			delete(b.Annotations, TraceSchedulingAnnotation)
			start := time.Now()
			bound, _, err := s.Store.Update(ctx, r.Namespace, r.Name, func(_ context.Context, existing runtime.Object) (runtime.Object, error) {
				if existing == nil {
					return nil, apierrors.NewNotFound(corev1.Resource("pods"), r.Name)
				}
				pod := existing.DeepCopyObject().(*corev1.Pod)
				if pod.DeletionTimestamp != nil {
					return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), r.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", r.Name))
				}
				if pod.Spec.NodeName != "" {
					return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), r.Name, fmt.Errorf("pod %s is already assigned to node %q", r.Name, pod.Spec.NodeName))
				}
				if b.UID != "" && b.UID != pod.UID {
					return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), r.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
				}
				pod.Spec.NodeName = b.Target.Name
				for k, v := range b.Annotations {
					if pod.Annotations == nil {
						pod.Annotations = map[string]string{}
					}
					pod.Annotations[k] = v
				}
				setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
				return pod, nil
			}, registry.UpdateOptions{WriteOptions: s.WriteOptionsFor(req, r), Strategy: bindStrategy(), AllowUnconditional: true})
			if err != nil {
				return nil, err
			}
			traceBinding(ctx, s.Store, r, b, bound, summary, hasSummary, start)
			return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
		})
	}
}

// bindStrategy lets the binding set nodeName and the PodScheduled condition.
func bindStrategy() registry.Strategy { return &strategy{} }

func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// logHandler answers pods/log without a kubelet connection (see WithKubeletConnection,
// which replaces it): it can only say that the container has not started.
func logHandler(s *endpoints.Scope) endpoints.HandlerFunc {
	return podLogHandler(s, KubeletConnection{})
}

func podPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
			{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
			{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
			endpoints.AgeColumn,
			{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
			{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
			{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
			{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
		},
		Row: func(obj runtime.Object) []any {
			pod := obj.(*corev1.Pod)
			ready, total, restarts, reason := podSummary(pod)
			ip, node, nominated, gates := "<none>", "<none>", "<none>", "<none>"
			if pod.Status.PodIP != "" {
				ip = pod.Status.PodIP
			}
			if pod.Spec.NodeName != "" {
				node = pod.Spec.NodeName
			}
			if pod.Status.NominatedNodeName != "" {
				nominated = pod.Status.NominatedNodeName
			}
			if len(pod.Spec.ReadinessGates) > 0 {
				gates = fmt.Sprintf("%d/%d", readyGates(pod), len(pod.Spec.ReadinessGates))
			}
			return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restarts,
				endpoints.Age(pod.CreationTimestamp, time.Now()), ip, node, nominated, gates}
		},
	}
}

func readyGates(pod *corev1.Pod) int {
	n := 0
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// podSummary computes kubectl's READY, RESTARTS and STATUS for a pod.
func podSummary(pod *corev1.Pod) (ready, total int, restarts, reason string) {
	total = len(pod.Spec.Containers)
	reason = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	count := 0
	var last time.Time
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		count += int(cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil:
			reason = "Init:" + cs.State.Terminated.Reason
			if cs.State.Terminated.Reason == "" {
				reason = fmt.Sprintf("Init:ExitCode:%d", cs.State.Terminated.ExitCode)
			}
			initializing = true
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + cs.State.Waiting.Reason
			initializing = true
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
			initializing = true
		}
		break
	}
	if !initializing {
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			count += int(cs.RestartCount)
			if t := cs.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(last) {
				last = t.FinishedAt.Time
			}
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				reason = cs.State.Waiting.Reason
			case cs.State.Terminated != nil && cs.State.Terminated.Reason != "":
				reason = cs.State.Terminated.Reason
			case cs.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "Running"
		}
	}
	if pod.DeletionTimestamp != nil {
		reason = "Terminating"
		if pod.Status.Reason == "NodeLost" {
			reason = "Unknown"
		}
	}
	restarts = strconv.Itoa(count)
	if !last.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", count, endpoints.Age(metav1.NewTime(last), time.Now()))
	}
	return ready, total, restarts, reason
}
