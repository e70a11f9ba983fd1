package resources

import (
	"k8s.io/apimachinery/pkg/util/intstr"
	"strings"
	"testing"

	wasmv1 "github.com/wasmplane/wasmplane/core/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validPod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "hello:1"}}}}
	defaultPodSpec(&p.Spec)
	return p
}

// errFields returns the field paths of errs, for compact comparison.
func errFields(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+":"+string(e.Type))
	}
	return strings.Join(out, ",")
}

func TestValidatePodSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *corev1.Pod)
		want   string
	}{
		{"valid", func(*corev1.Pod) {}, ""},
		{"no containers", func(p *corev1.Pod) { p.Spec.Containers = nil }, "spec.containers:FieldValueRequired"},
		{"no image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " " }, "spec.containers[0].image:FieldValueRequired"},
		{"bad name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "Bad_Name" }, "spec.containers[0].name:FieldValueInvalid"},
		{"duplicate name", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "c", Image: "x:1", ImagePullPolicy: corev1.PullAlways}}
		}, "spec.containers[0].name:FieldValueDuplicate"},
		{"restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy:FieldValueNotSupported"},
		{"port range", func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}} },
			"spec.containers[0].ports[0].containerPort:FieldValueInvalid"},
		{"requests over limits", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}, "spec.containers[0].resources.requests[cpu]:FieldValueInvalid"},
		{"toleration operator", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}, "spec.tolerations[0].operator:FieldValueInvalid"},
		{"probe without handler", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
		}, "spec.containers[0].readinessProbe:FieldValueRequired"},
		{"probe with two handlers", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}},
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}, SuccessThreshold: 1}
		}, "spec.containers[0].readinessProbe:FieldValueForbidden"},
		{"liveness needs one success", func(p *corev1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
		}, "spec.containers[0].livenessProbe.successThreshold:FieldValueInvalid"},
		{"negative period", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: -1, SuccessThreshold: 1}
		}, "spec.containers[0].readinessProbe.periodSeconds:FieldValueInvalid"},
		{"http scheme", func(p *corev1.Pod) {
			p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80), Scheme: "FTP"}}, SuccessThreshold: 1}
		}, "spec.containers[0].startupProbe.httpGet.scheme:FieldValueNotSupported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			if got := errFields(validatePodSpec(&p.Spec, field.NewPath("spec"))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidatePodSpecUpdate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(p *corev1.Pod)
		wantErr bool
	}{
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "hello:2" }, false},
		{"add toleration", func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "a"}) }, false},
		{"bind", func(p *corev1.Pod) { p.Spec.NodeName = "n1" }, false},
		{"restart policy", func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, true},
		{"add container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "d", Image: "x"})
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, p := validPod(), validPod()
			tt.mutate(p)
			errs := validatePodSpecUpdate(&p.Spec, &old.Spec, field.NewPath("spec"))
			if (len(errs) > 0) != tt.wantErr {
				t.Errorf("errors %v, want error: %v", errs, tt.wantErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	p := validPod()
	c := p.Spec.Containers[0]
	if p.Spec.RestartPolicy != corev1.RestartPolicyAlways || p.Spec.DNSPolicy != corev1.DNSClusterFirst ||
		*p.Spec.TerminationGracePeriodSeconds != 30 || p.Spec.SchedulerName != corev1.DefaultSchedulerName ||
		c.ImagePullPolicy != corev1.PullIfNotPresent || c.TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Errorf("pod defaults not applied: %+v", p.Spec)
	}
	for image, want := range map[string]corev1.PullPolicy{
		"hello": corev1.PullAlways, "hello:latest": corev1.PullAlways, "hello:1": corev1.PullIfNotPresent,
		"host:5000/hello": corev1.PullAlways, "host:5000/hello:2": corev1.PullIfNotPresent, "hello@sha256:abc": corev1.PullIfNotPresent,
	} {
		c := corev1.Container{Image: image}
		defaultContainer(&c)
		if c.ImagePullPolicy != want {
			t.Errorf("%s: pull policy %s, want %s", image, c.ImagePullPolicy, want)
		}
	}
	// Probes get Kubernetes' timings, and HTTP ones a path and scheme.
	pc := corev1.Container{Image: "x:1", LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 2, FailureThreshold: 1},
		Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}}
	defaultContainer(&pc)
	lp, rp := pc.LivenessProbe, pc.ReadinessProbe
	if lp.TimeoutSeconds != 1 || lp.PeriodSeconds != 10 || lp.SuccessThreshold != 1 || lp.FailureThreshold != 3 ||
		lp.HTTPGet.Path != "/" || lp.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Errorf("liveness probe defaults: %+v %+v", lp, lp.HTTPGet)
	}
	if rp.PeriodSeconds != 2 || rp.FailureThreshold != 1 || rp.TimeoutSeconds != 1 || rp.SuccessThreshold != 1 {
		t.Errorf("readiness probe defaults overrode what was set: %+v", rp)
	}
	if h := pc.Lifecycle.PreStop.HTTPGet; h.Path != "/" || h.Scheme != corev1.URISchemeHTTP {
		t.Errorf("preStop httpGet defaults: %+v", h)
	}
	d := &appsv1.Deployment{}
	defaultDeployment(d)
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" || *d.Spec.RevisionHistoryLimit != 10 || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("deployment defaults not applied: %+v", d.Spec)
	}
}

func TestPodQOS(t *testing.T) {
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	tests := []struct {
		name string
		res  corev1.ResourceRequirements
		want corev1.PodQOSClass
	}{
		{"best effort", corev1.ResourceRequirements{}, corev1.PodQOSBestEffort},
		{"guaranteed", corev1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}, corev1.PodQOSGuaranteed},
		{"burstable", corev1.ResourceRequirements{Requests: rl("500m", "1Gi"), Limits: rl("1", "1Gi")}, corev1.PodQOSBurstable},
		{"requests only", corev1.ResourceRequirements{Requests: rl("1", "1Gi")}, corev1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &corev1.PodSpec{Containers: []corev1.Container{{Resources: tt.res}}}
			if got := podQOS(spec); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPodSummary(t *testing.T) {
	running := corev1.ContainerStatus{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	crash := corev1.ContainerStatus{Name: "c", RestartCount: 3, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	tests := []struct {
		name       string
		pod        func(p *corev1.Pod)
		wantReady  int
		wantReason string
	}{
		{"pending", func(*corev1.Pod) {}, 0, "Pending"},
		{"running", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running}
		}, 1, "Running"},
		{"crash loop", func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{crash} }, 0, "CrashLoopBackOff"},
		{"init", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "i", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		}, 0, "Init:0/1"},
		{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }, 0, "Terminating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			p.Status.Phase = corev1.PodPending
			tt.pod(p)
			ready, total, _, reason := podSummary(p)
			if ready != tt.wantReady || total != 1 || reason != tt.wantReason {
				t.Errorf("got %d/%d %q, want %d/1 %q", ready, total, reason, tt.wantReady, tt.wantReason)
			}
		})
	}
}

func TestPodGracePeriod(t *testing.T) {
	p := validPod()
	if g := podGracePeriod(p, &metav1.DeleteOptions{}); g != 0 {
		t.Errorf("unscheduled pod: grace %d, want 0", g)
	}
	p.Spec.NodeName = "n1"
	if g := podGracePeriod(p, &metav1.DeleteOptions{}); g != 30 {
		t.Errorf("scheduled pod: grace %d, want 30", g)
	}
	if g := podGracePeriod(p, &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); g != 0 {
		t.Errorf("forced: grace %d, want 0", g)
	}
	p.Status.Phase = corev1.PodSucceeded
	if g := podGracePeriod(p, &metav1.DeleteOptions{}); g != 0 {
		t.Errorf("finished pod: grace %d, want 0", g)
	}
}

func TestValidateWorkload(t *testing.T) {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}}, Spec: validPod().Spec}
	tests := []struct {
		name string
		sel  *metav1.LabelSelector
		reps int32
		want string
	}{
		{"valid", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, 1, ""},
		{"no selector", nil, 1, "spec.selector:FieldValueRequired"},
		{"mismatch", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "b"}}, 1, "spec.template.metadata.labels:FieldValueInvalid"},
		{"negative", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, -1, "spec.replicas:FieldValueInvalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errFields(validateWorkload(&tt.reps, tt.sel, &tmpl, field.NewPath("spec"))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidatePluginSpec(t *testing.T) {
	const sum = "93a44bbb96c751218e4c00d479e4c14358122a389acca16205b1e4d0dc5f9476"
	base := func() *wasmv1.WasmPluginSpec {
		return &wasmv1.WasmPluginSpec{Module: wasmv1.ModuleSource{Digest: "sha256:" + sum}, SHA256: sum, Hooks: []wasmv1.Hook{wasmv1.HookValidate}}
	}
	tests := []struct {
		name       string
		namespaced bool
		mutate     func(s *wasmv1.WasmPluginSpec)
		want       string
	}{
		{"valid", true, func(*wasmv1.WasmPluginSpec) {}, ""},
		{"two sources", false, func(s *wasmv1.WasmPluginSpec) { s.Module.File = "/x.wasm" }, "spec.module:FieldValueInvalid"},
		{"tenant file", true, func(s *wasmv1.WasmPluginSpec) { s.Module = wasmv1.ModuleSource{File: "/x.wasm"} }, "spec.module.file:FieldValueForbidden"},
		{"cluster file", false, func(s *wasmv1.WasmPluginSpec) { s.Module = wasmv1.ModuleSource{File: "/x.wasm"} }, ""},
		{"bad digest", true, func(s *wasmv1.WasmPluginSpec) { s.SHA256 = "abc" }, "spec.sha256:FieldValueInvalid"},
		{"digest mismatch", true, func(s *wasmv1.WasmPluginSpec) { s.Module.Digest = "sha256:" + strings.Repeat("0", 64) }, "spec.module.digest:FieldValueInvalid"},
		{"no hooks", true, func(s *wasmv1.WasmPluginSpec) { s.Hooks = nil }, "spec.hooks:FieldValueRequired"},
		{"unknown hook", true, func(s *wasmv1.WasmPluginSpec) { s.Hooks = []wasmv1.Hook{"fly"} }, "spec.hooks[0]:FieldValueNotSupported"},
		{"tenant authenticator", true, func(s *wasmv1.WasmPluginSpec) { s.Hooks = []wasmv1.Hook{wasmv1.HookAuthenticate} }, "spec.hooks[0]:FieldValueForbidden"},
		{"cluster authenticator", false, func(s *wasmv1.WasmPluginSpec) { s.Hooks = []wasmv1.Hook{wasmv1.HookAuthenticate} }, ""},
		{"initializer name", false, func(s *wasmv1.WasmPluginSpec) { s.Hooks = []wasmv1.Hook{wasmv1.HookInitialize} }, "spec.initializer:FieldValueRequired"},
		{"tenant namespace selector", true, func(s *wasmv1.WasmPluginSpec) { s.NamespaceSelector = &metav1.LabelSelector{} }, "spec.namespaceSelector:FieldValueForbidden"},
		{"failure policy", true, func(s *wasmv1.WasmPluginSpec) { p := wasmv1.FailurePolicy("Maybe"); s.FailurePolicy = &p }, "spec.failurePolicy:FieldValueNotSupported"},
		{"reinvocation policy", true, func(s *wasmv1.WasmPluginSpec) { s.ReinvocationPolicy = "Sometimes" }, "spec.reinvocationPolicy:FieldValueNotSupported"},
		{"reinvocation Never", true, func(s *wasmv1.WasmPluginSpec) { s.ReinvocationPolicy = wasmv1.Never }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.mutate(s)
			if got := errFields(validatePluginSpec(s, tt.namespaced, field.NewPath("spec"))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
