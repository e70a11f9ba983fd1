package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies s into out.
func (s *WasmPluginSpec) DeepCopyInto(out *WasmPluginSpec) {
	*out = *s
	out.Hooks = append([]Hook(nil), s.Hooks...)
	if s.Rules != nil {
		out.Rules = make([]Rule, len(s.Rules))
		for i, r := range s.Rules {
			out.Rules[i] = Rule{
				APIGroups: append([]string(nil), r.APIGroups...), APIVersions: append([]string(nil), r.APIVersions...),
				Resources: append([]string(nil), r.Resources...), Operations: append([]Operation(nil), r.Operations...), Scope: r.Scope,
			}
		}
	}
	out.NamespaceSelector = s.NamespaceSelector.DeepCopy()
	out.ObjectSelector = s.ObjectSelector.DeepCopy()
	if s.Scheduler != nil {
		out.Scheduler = &SchedulerBinding{Profiles: append([]string(nil), s.Scheduler.Profiles...), Weight: s.Scheduler.Weight}
	}
	if s.Config != nil {
		out.Config = s.Config.DeepCopy()
	}
	if s.Limits != nil {
		l := *s.Limits
		if s.Limits.Timeout != nil {
			t := *s.Limits.Timeout
			l.Timeout = &t
		}
		out.Limits = &l
	}
	if s.FailurePolicy != nil {
		f := *s.FailurePolicy
		out.FailurePolicy = &f
	}
}

// DeepCopyInto copies s into out.
func (s *WasmPluginStatus) DeepCopyInto(out *WasmPluginStatus) {
	*out = *s
	if s.Servers != nil {
		out.Servers = make([]ServerLoadState, len(s.Servers))
		for i := range s.Servers {
			out.Servers[i] = s.Servers[i]
			s.Servers[i].LastTransitionTime.DeepCopyInto(&out.Servers[i].LastTransitionTime)
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (p *WasmPlugin) DeepCopyObject() runtime.Object {
	out := &WasmPlugin{TypeMeta: p.TypeMeta}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	p.Status.DeepCopyInto(&out.Status)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *ClusterWasmPlugin) DeepCopyObject() runtime.Object {
	out := &ClusterWasmPlugin{TypeMeta: p.TypeMeta}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	p.Status.DeepCopyInto(&out.Status)
	return out
}

// DeepCopyObject implements runtime.Object.
func (m *WasmModule) DeepCopyObject() runtime.Object {
	out := &WasmModule{TypeMeta: m.TypeMeta, Spec: m.Spec}
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WasmPluginList) DeepCopyObject() runtime.Object {
	out := &WasmPluginList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(l.Items, func(p *WasmPlugin) WasmPlugin { return *p.DeepCopyObject().(*WasmPlugin) })
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *ClusterWasmPluginList) DeepCopyObject() runtime.Object {
	out := &ClusterWasmPluginList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(l.Items, func(p *ClusterWasmPlugin) ClusterWasmPlugin { return *p.DeepCopyObject().(*ClusterWasmPlugin) })
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *WasmModuleList) DeepCopyObject() runtime.Object {
	out := &WasmModuleList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = copyItems(l.Items, func(m *WasmModule) WasmModule { return *m.DeepCopyObject().(*WasmModule) })
	return out
}

func copyItems[T any](in []T, cp func(*T) T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = cp(&in[i])
	}
	return out
}
