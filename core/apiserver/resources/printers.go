package resources

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wasmplane/wasmplane/core/apiserver/endpoints"
	"github.com/wasmplane/wasmplane/core/apiserver/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const labelNodeRolePrefix = "node-role.kubernetes.io/"

func nodePrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			endpoints.NameColumn,
			{Name: "Status", Type: "string", Description: "The status of the node"},
			{Name: "Roles", Type: "string", Description: "The roles of the node"},
			endpoints.AgeColumn,
			{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
			{Name: "Internal-IP", Type: "string", Priority: 1, Description: "List of internal IPs."},
			{Name: "External-IP", Type: "string", Priority: 1, Description: "List of external IPs."},
			{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
			{Name: "Kernel-Version", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
			{Name: "Container-Runtime", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
		},
		Row: func(obj runtime.Object) []any {
			n := obj.(*corev1.Node)
			status := "Unknown"
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					status = "NotReady"
					if c.Status == corev1.ConditionTrue {
						status = "Ready"
					}
				}
			}
			if n.Spec.Unschedulable {
				status += ",SchedulingDisabled"
			}
			var roles []string
			for k := range n.Labels {
				if r, ok := strings.CutPrefix(k, labelNodeRolePrefix); ok && r != "" {
					roles = append(roles, r)
				}
			}
			sort.Strings(roles)
			role := "<none>"
			if len(roles) > 0 {
				role = strings.Join(roles, ",")
			}
			internal, external := "<none>", "<none>"
			for _, a := range n.Status.Addresses {
				switch a.Type {
				case corev1.NodeInternalIP:
					if internal == "<none>" {
						internal = a.Address
					}
				case corev1.NodeExternalIP:
					if external == "<none>" {
						external = a.Address
					}
				}
			}
			info := n.Status.NodeInfo
			return []any{n.Name, status, role, endpoints.Age(n.CreationTimestamp, time.Now()), info.KubeletVersion,
				internal, external, orNone(info.OSImage), orNone(info.KernelVersion), orNone(info.ContainerRuntimeVersion)}
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

func eventPrinter() *registry.Printer {
	return &registry.Printer{
		Columns: []registry.TableColumn{
			{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
			{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
			{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
			{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
			{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.Event{}.InvolvedObject.SwaggerDoc()["fieldPath"]},
			{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
			{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
			{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
			{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
			{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		},
		Row: func(obj runtime.Object) []any {
			e := obj.(*corev1.Event)
			now := time.Now()
			first, last := e.FirstTimestamp, e.LastTimestamp
			if last.IsZero() {
				last = metav1.NewTime(e.EventTime.Time)
			}
			if first.IsZero() {
				first = last
			}
			if last.IsZero() {
				last = e.CreationTimestamp
			}
			source := e.Source.Component
			if e.Source.Host != "" {
				source += ", " + e.Source.Host
			}
			if source == "" {
				source = e.ReportingController
			}
			obj2 := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
			count := e.Count
			if e.Series != nil {
				count = e.Series.Count
			}
			return []any{endpoints.Age(last, now), e.Type, e.Reason, obj2, e.InvolvedObject.FieldPath, source, strings.TrimSpace(e.Message),
				endpoints.Age(first, now), fmt.Sprint(count), e.Name}
		},
	}
}
