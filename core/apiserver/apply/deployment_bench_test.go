package apply

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// defaultDeployment sets the defaults kube-apiserver gives the fields the benchmark's
// Deployment leaves out (a subset of SetObjectDefaults_Deployment, enough to make the
// stored object look like a served one).
func defaultDeployment(obj runtime.Object) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	i32 := func(v int32) *int32 { return &v }
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = i32(1)
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = i32(10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = i32(600)
	}
	if d.Spec.Strategy.Type == "" {
		q := intstr.FromString("25%")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &q, MaxSurge: &q}}
	}
	ps := &d.Spec.Template.Spec
	if ps.RestartPolicy == "" {
		ps.RestartPolicy = corev1.RestartPolicyAlways
	}
	if ps.DNSPolicy == "" {
		ps.DNSPolicy = corev1.DNSClusterFirst
	}
	if ps.SchedulerName == "" {
		ps.SchedulerName = corev1.DefaultSchedulerName
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	if ps.TerminationGracePeriodSeconds == nil {
		v := int64(30)
		ps.TerminationGracePeriodSeconds = &v
	}
	for i := range ps.Containers {
		c := &ps.Containers[i]
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
		for j := range c.Ports {
			if c.Ports[j].Protocol == "" {
				c.Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// benchApplyBody is the Deployment tests/bench/apply sends, as JSON.
func benchApplyBody(name, image string) []byte {
	return []byte(fmt.Sprintf(`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":%[1]q,"namespace":"default","labels":{"app":%[1]q}},`+
		`"spec":{"replicas":1,"selector":{"matchLabels":{"app":%[1]q}},"template":{"metadata":{"labels":{"app":%[1]q}},`+
		`"spec":{"containers":[{"name":"app","image":%[2]q,"ports":[{"name":"http","containerPort":8080}],"env":[{"name":"MODE","value":"bench"}]}]}}}}`, name, image))
}

func deploymentManagers(tb testing.TB) *Managers {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	m, err := NewManagers(Config{Scheme: scheme, Kind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Default: defaultDeployment,
		ResetFields: StatusResetFields(nil)})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkDeploymentApply is the field manager's part of tests/bench/apply's server-side
// apply: the whole Deployment applied again with its image changed, on the object the
// previous apply stored; "reflect" with typed values read from the Go objects (the
// library's way), "unstructured" with the field manager Managers gives applies.
func BenchmarkDeploymentApply(b *testing.B) {
	fms := deploymentManagers(b).For(Main)
	for _, tc := range []struct {
		name  string
		apply func(live, patch runtime.Object, manager string, force bool) (runtime.Object, error)
	}{{"reflect", fms.update.Apply}, {"unstructured", fms.Apply}} {
		b.Run(tc.name, func(b *testing.B) {
			var live runtime.Object = &appsv1.Deployment{}
			step := func(i int) {
				patch, _, err := DecodePatch(benchApplyBody("web-0", fmt.Sprintf("app:%d", i%2)), true)
				if err != nil {
					b.Fatal(err)
				}
				out, err := tc.apply(live, patch, "bench", true)
				if err != nil {
					b.Fatal(err)
				}
				defaultDeployment(out)
				live = out
			}
			step(0)
			step(1)
			for i := 0; b.Loop(); i++ {
				step(i)
			}
		})
	}
}
