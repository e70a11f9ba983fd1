package framework

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrNotFound is returned when a state key, plugin or profile does not exist.
var ErrNotFound = errors.New("not found")

func errDuplicate(name string) error { return fmt.Errorf("plugin %q registered twice", name) }

// PluginRef names a plugin in a configuration (with a weight for Score).
type PluginRef struct {
	// Name is the plugin name.
	Name string `json:"name"`
	// Weight is the Score weight (0 = default 1).
	Weight int32 `json:"weight,omitempty"`
}

// PluginList enables and disables plugins at one extension point ("*" disables all defaults).
type PluginList struct {
	// Enabled are added after the defaults that remain (or replace them in place).
	Enabled []PluginRef `json:"enabled,omitempty"`
	// Disabled remove defaults.
	Disabled []PluginRef `json:"disabled,omitempty"`
}

// Plugins lists the plugins per extension point, as KubeSchedulerConfiguration v1.
type Plugins struct {
	// MultiPoint enables a plugin at every extension point it implements.
	MultiPoint PluginList `json:"multiPoint,omitempty"`
	// QueueSort orders the queue (exactly one).
	QueueSort PluginList `json:"queueSort,omitempty"`
	// PreFilter plugins.
	PreFilter PluginList `json:"preFilter,omitempty"`
	// Filter plugins.
	Filter PluginList `json:"filter,omitempty"`
	// PostFilter plugins.
	PostFilter PluginList `json:"postFilter,omitempty"`
	// PreScore plugins.
	PreScore PluginList `json:"preScore,omitempty"`
	// Score plugins (with weights).
	Score PluginList `json:"score,omitempty"`
	// Reserve plugins.
	Reserve PluginList `json:"reserve,omitempty"`
	// Permit plugins.
	Permit PluginList `json:"permit,omitempty"`
	// PreBind plugins.
	PreBind PluginList `json:"preBind,omitempty"`
	// Bind plugins.
	Bind PluginList `json:"bind,omitempty"`
	// PostBind plugins.
	PostBind PluginList `json:"postBind,omitempty"`
}

// PluginConfig carries one plugin's args.
type PluginConfig struct {
	// Name is the plugin name.
	Name string `json:"name"`
	// Args are the plugin's arguments as JSON (YAML is converted on load).
	Args json.RawMessage `json:"args,omitempty"`
}

// mergeList applies custom on top of defaults the way kube-scheduler does: disabled
// names (or "*") drop defaults, a re-enabled default is replaced in place, and the other
// enabled plugins are appended.
func mergeList(defaults, custom PluginList) []PluginRef {
	disabled := map[string]bool{}
	for _, p := range custom.Disabled {
		disabled[p.Name] = true
	}
	customIdx := map[string]int{}
	for i, p := range custom.Enabled {
		customIdx[p.Name] = i
	}
	used := map[int]bool{}
	var out []PluginRef
	if !disabled["*"] {
		for _, p := range defaults.Enabled {
			if disabled[p.Name] {
				continue
			}
			if i, ok := customIdx[p.Name]; ok {
				out = append(out, custom.Enabled[i])
				used[i] = true
				continue
			}
			out = append(out, p)
		}
	}
	for i, p := range custom.Enabled {
		if !used[i] {
			out = append(out, p)
		}
	}
	return out
}

// MergePlugins overlays custom on defaults per extension point (nil custom = defaults).
func MergePlugins(defaults, custom *Plugins) *Plugins {
	if defaults == nil {
		defaults = &Plugins{}
	}
	if custom == nil {
		c := *defaults
		return &c
	}
	m := func(d, c PluginList) PluginList {
		return PluginList{Enabled: mergeList(d, c), Disabled: append(append([]PluginRef(nil), d.Disabled...), c.Disabled...)}
	}
	return &Plugins{
		MultiPoint: m(defaults.MultiPoint, custom.MultiPoint),
		QueueSort:  m(defaults.QueueSort, custom.QueueSort),
		PreFilter:  m(defaults.PreFilter, custom.PreFilter),
		Filter:     m(defaults.Filter, custom.Filter),
		PostFilter: m(defaults.PostFilter, custom.PostFilter),
		PreScore:   m(defaults.PreScore, custom.PreScore),
		Score:      m(defaults.Score, custom.Score),
		Reserve:    m(defaults.Reserve, custom.Reserve),
		Permit:     m(defaults.Permit, custom.Permit),
		PreBind:    m(defaults.PreBind, custom.PreBind),
		Bind:       m(defaults.Bind, custom.Bind),
		PostBind:   m(defaults.PostBind, custom.PostBind),
	}
}
