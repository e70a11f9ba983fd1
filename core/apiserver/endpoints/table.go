package endpoints

import (
	"fmt"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// NameColumn is the Name column every resource shows.
var NameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}

// AgeColumn is the Age column most resources show.
var AgeColumn = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}

// Table renders obj (an object or a list) as a meta.k8s.io/v1 Table.
func (s *Scope) Table(obj runtime.Object, opts *metav1.TableOptions, withColumns bool) (*metav1.Table, error) {
	p := s.resource().Printer
	table := &metav1.Table{}
	if withColumns && !opts.NoHeaders {
		table.ColumnDefinitions = columnsOf(p)
	}
	var items []runtime.Object
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = lm.GetResourceVersion()
			table.Continue = lm.GetContinue()
			table.RemainingItemCount = lm.GetRemainingItemCount()
		}
	} else {
		items = []runtime.Object{obj}
		if m, err := meta.Accessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		row := metav1.TableRow{}
		if p != nil {
			row.Cells = p.Row(item)
		} else {
			row.Cells = []any{m.GetName(), Age(m.GetCreationTimestamp(), now)}
		}
		switch opts.IncludeObject {
		case metav1.IncludeNone:
		case metav1.IncludeObject:
			row.Object.Object = item
		default:
			pom, err := partialMetadata(item, s.resource().GroupVersionKind())
			if err != nil {
				return nil, err
			}
			row.Object.Object = pom
		}
		table.Rows = append(table.Rows, row)
	}
	if table.Rows == nil {
		table.Rows = []metav1.TableRow{}
	}
	return table, nil
}

func columnsOf(p *registry.Printer) []metav1.TableColumnDefinition {
	if p == nil {
		return []metav1.TableColumnDefinition{NameColumn, AgeColumn}
	}
	return p.Columns
}

// Age formats the time since t the way kubectl shows it.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// partialMetadata converts an object or list to PartialObjectMetadata(List).
func partialMetadata(obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, error) {
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"))
		if lm, err := meta.ListAccessor(obj); err == nil {
			list.ResourceVersion = lm.GetResourceVersion()
			list.Continue = lm.GetContinue()
			list.RemainingItemCount = lm.GetRemainingItemCount()
		}
		list.Items = make([]metav1.PartialObjectMetadata, 0, len(items))
		for _, item := range items {
			p, err := partialMetadata(item, gvk)
			if err != nil {
				return nil, err
			}
			list.Items = append(list.Items, *p.(*metav1.PartialObjectMetadata))
		}
		return list, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		// A custom object's metadata is a map: convert it.
		pom := &metav1.PartialObjectMetadata{}
		if m, ok := u.Object["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &pom.ObjectMeta); err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("reading the metadata of %s: %w", u.GetName(), err))
			}
		}
		pom.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
		return pom, nil
	}
	ma, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("%T has no object metadata", obj))
	}
	om, ok := ma.GetObjectMeta().(*metav1.ObjectMeta)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("unexpected metadata type %T", ma.GetObjectMeta()))
	}
	pom := &metav1.PartialObjectMetadata{ObjectMeta: *om.DeepCopy()}
	pom.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	return pom, nil
}
