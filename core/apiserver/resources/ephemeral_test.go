package resources

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func debugPod(ecs ...corev1.EphemeralContainer) *corev1.Pod {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers:      []corev1.Container{{Name: "setup", Image: "setup:v1"}},
		Containers:          []corev1.Container{{Name: "app", Image: "app:v1"}},
		EphemeralContainers: ecs,
	}}
	p.Name, p.Namespace = "p", "default"
	defaultPodSpec(&p.Spec)
	return p
}

func ephemeral(name string, edit func(*corev1.EphemeralContainer)) corev1.EphemeralContainer {
	ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "debug:v1"}}
	if edit != nil {
		edit(&ec)
	}
	return ec
}

func TestValidateEphemeralContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		ec   corev1.EphemeralContainer
		want []string
	}{
		{"plain", ephemeral("debugger", nil), nil},
		{"targets a container", ephemeral("debugger", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "app" }), nil},
		{"targets an init container", ephemeral("debugger", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "setup" }), nil},
		{"interactive, env and mounts", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			c.Stdin, c.TTY, c.Env = true, true, []corev1.EnvVar{{Name: "A", Value: "b"}}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}), nil},
		{"unknown target", ephemeral("debugger", func(c *corev1.EphemeralContainer) { c.TargetContainerName = "nope" }),
			[]string{"FieldValueNotFound spec.ephemeralContainers[0].targetContainerName"}},
		{"name of a container", ephemeral("app", nil), []string{"FieldValueDuplicate spec.ephemeralContainers[0].name"}},
		{"name of an init container", ephemeral("setup", nil), []string{"FieldValueDuplicate spec.ephemeralContainers[0].name"}},
		{"no image", ephemeral("debugger", func(c *corev1.EphemeralContainer) { c.Image = "" }),
			[]string{"FieldValueRequired spec.ephemeralContainers[0].image"}},
		{"bad name", ephemeral("Debugger", nil), []string{"FieldValueInvalid spec.ephemeralContainers[0].name"}},
		{"ports", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		}), []string{"FieldValueForbidden spec.ephemeralContainers[0].ports"}},
		{"probes and lifecycle", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}},
				TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
			c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = probe, probe, probe
			c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 1}}}
		}), []string{"FieldValueForbidden spec.ephemeralContainers[0].livenessProbe", "FieldValueForbidden spec.ephemeralContainers[0].readinessProbe",
			"FieldValueForbidden spec.ephemeralContainers[0].startupProbe", "FieldValueForbidden spec.ephemeralContainers[0].lifecycle"}},
		{"resources", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
		}), []string{"FieldValueForbidden spec.ephemeralContainers[0].resources"}},
		{"restart policy", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			always := corev1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}), []string{"FieldValueForbidden spec.ephemeralContainers[0].restartPolicy"}},
		{"sub-path mount", ephemeral("debugger", func(c *corev1.EphemeralContainer) {
			c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "x"}}
		}), []string{"FieldValueForbidden spec.ephemeralContainers[0].volumeMounts[0].subPath"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := debugPod(tc.ec)
			checkErrors(t, validatePodSpec(&pod.Spec, field.NewPath("spec")), tc.want)
		})
	}
}

func TestEphemeralContainersUpdate(t *testing.T) {
	first := ephemeral("first", nil)
	for _, tc := range []struct {
		name     string
		old      *corev1.Pod
		edit     func(*corev1.Pod)
		want     []string
		wantMsgs []string
	}{
		{"add the first", debugPod(), func(p *corev1.Pod) { p.Spec.EphemeralContainers = []corev1.EphemeralContainer{first} }, nil, nil},
		{"add a second", debugPod(first), func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ephemeral("second", nil))
		}, nil, nil},
		{"reordered", debugPod(first, ephemeral("second", nil)), func(p *corev1.Pod) {
			e := p.Spec.EphemeralContainers
			e[0], e[1] = e[1], e[0]
		}, nil, nil},
		{"change one", debugPod(first), func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "other:v2" },
			[]string{"FieldValueForbidden spec.ephemeralContainers[first]"}, []string{`existing ephemeral containers "first" may not be changed`}},
		{"remove one", debugPod(first), func(p *corev1.Pod) { p.Spec.EphemeralContainers = nil },
			[]string{"FieldValueForbidden spec.ephemeralContainers"}, []string{`existing ephemeral containers "first" may not be removed`}},
		{"mirror pod", func() *corev1.Pod {
			p := debugPod()
			p.Annotations = map[string]string{mirrorPodAnnotation: "x"}
			return p
		}(), func(p *corev1.Pod) { p.Spec.EphemeralContainers = []corev1.EphemeralContainer{first} },
			[]string{"FieldValueForbidden metadata.annotations[kubernetes.io/config.mirror]"}, []string{"static pods do not support ephemeral containers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ephemeralContainersStrategy()
			pod := tc.old.DeepCopy()
			tc.edit(pod)
			s.Default(pod)
			s.PrepareForUpdate(context.Background(), pod, tc.old)
			errs := s.ValidateUpdate(context.Background(), pod, tc.old)
			checkErrors(t, errs, tc.want)
			for i, m := range tc.wantMsgs {
				if errs[i].Detail != m {
					t.Errorf("message %q, want %q", errs[i].Detail, m)
				}
			}
		})
	}
}

// TestEphemeralContainersStrategyKeepsTheRest checks that a write through the
// subresource changes spec.ephemeralContainers and nothing else.
func TestEphemeralContainersStrategyKeepsTheRest(t *testing.T) {
	old := debugPod()
	old.Labels = map[string]string{"app": "a"}
	old.Status.Phase = corev1.PodRunning
	pod := old.DeepCopy()
	pod.Labels["app"] = "changed"
	pod.Spec.Containers[0].Image = "app:v2"
	pod.Status.Phase = corev1.PodFailed
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{ephemeral("debugger", nil)}
	s := ephemeralContainersStrategy()
	s.Default(pod)
	s.PrepareForUpdate(context.Background(), pod, old)
	if pod.Labels["app"] != "a" || pod.Spec.Containers[0].Image != "app:v1" || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("the subresource changed more than ephemeral containers: labels %v, image %s, phase %s",
			pod.Labels, pod.Spec.Containers[0].Image, pod.Status.Phase)
	}
	if len(pod.Spec.EphemeralContainers) != 1 || pod.Spec.EphemeralContainers[0].TerminationMessagePolicy != corev1.TerminationMessageReadFile {
		t.Errorf("ephemeral containers %+v, want the debugger with defaults", pod.Spec.EphemeralContainers)
	}
}

func TestPodCreateRefusesEphemeralContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{"without", debugPod(), nil},
		{"with", debugPod(ephemeral("debugger", nil)), []string{"FieldValueForbidden spec.ephemeralContainers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, validatePodCreate(tc.pod), tc.want)
		})
	}
	tmpl := debugPod(ephemeral("debugger", nil)).Spec
	checkErrors(t, validateTemplatePodSpec(&tmpl, field.NewPath("spec", "template", "spec")), []string{"FieldValueForbidden spec.template.spec.ephemeralContainers"})
}
