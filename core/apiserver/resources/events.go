package resources

import (
	"fmt"
	"maps"
	"slices"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// eventFieldLabels are the events.k8s.io/v1 field selector labels and the core/v1 field
// each selects on, as Kubernetes' field label conversion for events.k8s.io names them.
var eventFieldLabels = map[string]string{
	"reason": "reason", "type": "type", "reportingController": "reportingComponent",
	"regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
	"regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
	"regarding.apiVersion": "involvedObject.apiVersion", "regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath": "involvedObject.fieldPath",
}

// coreEventAttrs are a core/v1 Event's selector fields. "source" falls back to the
// reporting controller, so that an event written through events.k8s.io/v1 (which has
// no source) is found by the component that reported it, as in Kubernetes.
func coreEventAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return nil, nil, fmt.Errorf("not an Event: %T", obj)
	}
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return labels.Set(e.Labels), fields.Set{
		"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
		"involvedObject.apiVersion": e.InvolvedObject.APIVersion, "involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason, "reportingComponent": e.ReportingController,
		"source": source, "type": e.Type,
	}, nil
}

// Events returns events.k8s.io/v1 Events. They are the core/v1 Events, kept in their
// storage and converted on the way in and out (Kubernetes serves both versions of one
// stored object), so an event written through either API is read through both.
func Events() []Definition {
	d := simple(eventsv1.SchemeGroupVersion, "events", "event", "Event", []string{"ev"},
		func() runtime.Object { return &eventsv1.Event{} }, func() runtime.Object { return &eventsv1.EventList{} },
		&strategy{validate: func(obj runtime.Object) field.ErrorList {
			e := obj.(*eventsv1.Event)
			var errs field.ErrorList
			if e.EventTime.IsZero() {
				errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
			}
			if e.ReportingController == "" {
				errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
			}
			if e.Action == "" {
				errs = append(errs, field.Required(field.NewPath("action"), ""))
			}
			if e.Reason == "" {
				errs = append(errs, field.Required(field.NewPath("reason"), ""))
			}
			return errs
		}, validateOnUpdate: true}, nil)
	r := d.Resource
	r.AllowCreateOnUpdate = true
	r.StoragePrefix = builtinPrefix(corev1.GroupName, "events")
	r.FieldLabels = slices.Sorted(maps.Keys(eventFieldLabels))
	r.StoredAs = &registry.StoredAs{
		NewFunc:     func() runtime.Object { return &corev1.Event{} },
		NewListFunc: func() runtime.Object { return &corev1.EventList{} },
		GetAttrs:    coreEventAttrs,
		FieldLabels: eventFieldLabels,
		ToStored: func(obj runtime.Object) (runtime.Object, error) {
			e, ok := obj.(*eventsv1.Event)
			if !ok {
				return nil, fmt.Errorf("not an events.k8s.io Event: %T", obj)
			}
			return coreEventOf(e), nil
		},
		FromStored: func(obj runtime.Object) (runtime.Object, error) {
			e, ok := obj.(*corev1.Event)
			if !ok {
				return nil, fmt.Errorf("not a core Event: %T", obj)
			}
			return eventOf(e), nil
		},
	}
	return []Definition{d}
}

// coreEventOf converts an events.k8s.io/v1 Event to core/v1, as Kubernetes' conversion
// does: regarding is the involved object, note the message, and the deprecated fields
// are core's source, timestamps and count.
func coreEventOf(e *eventsv1.Event) *corev1.Event {
	e = e.DeepCopy()
	out := &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta:     e.ObjectMeta,
		InvolvedObject: e.Regarding, Related: e.Related,
		Reason: e.Reason, Message: e.Note, Type: e.Type, Action: e.Action,
		EventTime: e.EventTime, ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		Source: e.DeprecatedSource, FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp,
		Count: e.DeprecatedCount,
	}
	if e.Series != nil {
		out.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}

// eventOf converts a core/v1 Event to events.k8s.io/v1 (the reverse of coreEventOf).
func eventOf(e *corev1.Event) *eventsv1.Event {
	e = e.DeepCopy()
	out := &eventsv1.Event{
		ObjectMeta: e.ObjectMeta,
		Regarding:  e.InvolvedObject, Related: e.Related,
		Reason: e.Reason, Note: e.Message, Type: e.Type, Action: e.Action,
		EventTime: e.EventTime, ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
		DeprecatedSource: e.Source, DeprecatedFirstTimestamp: e.FirstTimestamp, DeprecatedLastTimestamp: e.LastTimestamp,
		DeprecatedCount: e.Count,
	}
	out.APIVersion, out.Kind = eventsv1.SchemeGroupVersion.String(), "Event"
	if e.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	return out
}
