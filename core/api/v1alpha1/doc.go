package v1alpha1

// The SwaggerDoc methods give `kubectl explain` its descriptions, as the generated
// types_swagger_doc_generated.go files do for k8s.io/api.

// SwaggerDoc describes WasmPlugin.
func (WasmPlugin) SwaggerDoc() map[string]string {
	return map[string]string{
		"":       "WasmPlugin runs a WebAssembly module at wasmplane's extension points (admission, initializers, scheduling) for objects of its own namespace only.",
		"spec":   "Spec is the module, its hooks and where it applies.",
		"status": "Status reports whether each server has loaded the module.",
	}
}

// SwaggerDoc describes ClusterWasmPlugin.
func (ClusterWasmPlugin) SwaggerDoc() map[string]string {
	return map[string]string{
		"":       "ClusterWasmPlugin runs a WebAssembly module at wasmplane's extension points (authentication, admission, initializers, scheduling) for the whole cluster. Only cluster administrators should be allowed to create them.",
		"spec":   "Spec is the module, its hooks and where it applies.",
		"status": "Status reports whether each server has loaded the module.",
	}
}

// SwaggerDoc describes WasmPluginSpec.
func (WasmPluginSpec) SwaggerDoc() map[string]string {
	return map[string]string{
		"":                   "WasmPluginSpec is what a plugin runs and where.",
		"module":             "Module says where the module's bytes come from: a module stored in the cluster (digest), a file on the server, or a URL.",
		"sha256":             "SHA256 pins the module: the lowercase hex sha256 of its bytes. Servers refuse bytes with another digest.",
		"hooks":              "Hooks are the entry points the plugin is used for: authenticate, mutate, validate, initialize, filter, score.",
		"rules":              "Rules select the admission requests and objects the plugin sees (groups, versions, resources, operations, scope).",
		"namespaceSelector":  "NamespaceSelector narrows a ClusterWasmPlugin to namespaces whose labels match.",
		"objectSelector":     "ObjectSelector narrows the plugin to objects whose labels match.",
		"initializer":        "Initializer is the initializer name (for example podimage.example.com) that the initialize hook serves.",
		"scheduler":          "Scheduler places filter and score hooks in scheduler profiles, with a weight.",
		"config":             "Config is free JSON handed to the module's configure hook once per instance; the module may reject it.",
		"limits":             "Limits bound memory, call time, input and output sizes and instances; unset values take the server's defaults.",
		"failurePolicy":      "FailurePolicy says what happens when the plugin fails (trap, timeout, bad answer): Fail (default) or Ignore.",
		"reinvocationPolicy": "ReinvocationPolicy says whether the mutate hook runs once more when a plugin after it changed the object: IfNeeded (default) or Never.",
		"order":              "Order places the plugin among plugins of the same hook, lower first.",
		"fullObjects":        "FullObjects sends whole Node and Pod objects to scheduling hooks instead of compact documents.",
	}
}

// SwaggerDoc describes ModuleSource.
func (ModuleSource) SwaggerDoc() map[string]string {
	return map[string]string{
		"":       "ModuleSource says where a module comes from; exactly one member is set.",
		"digest": "Digest names a module uploaded to the cluster (`wasmplane plugin push`), as sha256:<hex>.",
		"file":   "File is an absolute path or file:// URL on the server.",
		"url":    "URL is an OCI or HTTP reference (reserved).",
	}
}

// SwaggerDoc describes Rule.
func (Rule) SwaggerDoc() map[string]string {
	return map[string]string{
		"":            "Rule matches requests like an admission webhook rule or an InitializerConfiguration rule.",
		"apiGroups":   "APIGroups matched; \"*\" is all, \"\" is the core group.",
		"apiVersions": "APIVersions matched; \"*\" is all.",
		"resources":   "Resources matched, such as pods, pods/status, * or */*.",
		"operations":  "Operations matched: CREATE, UPDATE, DELETE, CONNECT or *; empty is all.",
		"scope":       "Scope is Cluster, Namespaced or * (default).",
	}
}

// SwaggerDoc describes SchedulerBinding.
func (SchedulerBinding) SwaggerDoc() map[string]string {
	return map[string]string{
		"":         "SchedulerBinding places filter and score hooks in scheduler profiles.",
		"profiles": "Profiles are schedulerName values; empty means default-scheduler.",
		"weight":   "Weight multiplies the score hook's normalized score (default 1).",
	}
}

// SwaggerDoc describes Limits.
func (Limits) SwaggerDoc() map[string]string {
	return map[string]string{
		"":               "Limits bound one plugin.",
		"memoryPages":    "MemoryPages is the most linear memory an instance may have, in 64 KiB pages.",
		"timeout":        "Timeout is the deadline of one call; a guest still running then is stopped.",
		"maxInputBytes":  "MaxInputBytes bounds the request handed to the guest.",
		"maxOutputBytes": "MaxOutputBytes bounds the guest's answer.",
		"maxInstances":   "MaxInstances bounds the instance pool.",
	}
}

// SwaggerDoc describes WasmPluginStatus.
func (WasmPluginStatus) SwaggerDoc() map[string]string {
	return map[string]string{
		"":                   "WasmPluginStatus reports how the plugin is loaded.",
		"phase":              "Phase is Pending, Loaded or Failed.",
		"digest":             "Digest is the module in use.",
		"message":            "Message explains the phase.",
		"observedGeneration": "ObservedGeneration is the spec generation this status describes.",
		"servers":            "Servers is each server's load state.",
	}
}

// SwaggerDoc describes WasmModule.
func (WasmModule) SwaggerDoc() map[string]string {
	return map[string]string{
		"":     "WasmModule is a WebAssembly module stored in the cluster, named sha256-<hex>. Upload one with POST and Content-Type application/wasm; download its bytes from the blob subresource.",
		"spec": "Spec describes the stored bytes.",
	}
}

// SwaggerDoc describes WasmModuleSpec.
func (WasmModuleSpec) SwaggerDoc() map[string]string {
	return map[string]string{
		"":       "WasmModuleSpec describes a stored module.",
		"digest": "Digest is sha256:<hex> of the bytes.",
		"size":   "Size is the module's length in bytes.",
		"chunks": "Chunks is how many etcd values hold the bytes.",
	}
}
