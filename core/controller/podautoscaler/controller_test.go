package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fixedMetrics reports the same CPU usage for every listed pod.
type fixedMetrics struct {
	usage map[string]int64 // pod name → millicores
	err   error
}

func (f fixedMetrics) ListPodMetrics(_ context.Context, _ string, _ labels.Selector) ([]PodUsage, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []PodUsage
	for name, m := range f.usage {
		out = append(out, PodUsage{Name: name, Timestamp: t0.Add(-5 * time.Second), Window: 30 * time.Second,
			Containers: []ContainerUsage{{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}}}})
	}
	return out, nil
}

// resettable is a fixed REST mapper with nothing to reset.
type resettable struct{ meta.RESTMapper }

func (resettable) Reset() {}

// fixture is a controller over fake clients: one Deployment "web" scaled through a fake
// scale client that keeps its replicas, with an HPA on it and some pods.
type fixture struct {
	c        *Controller
	client   *fake.Clientset
	scales   *scalefake.FakeScaleClient
	replicas int32
	recorder *record.FakeRecorder
}

func newFixture(t testing.TB, hpa *autoscalingv2.HorizontalPodAutoscaler, replicas int32, pods []*corev1.Pod, metrics PodMetricsLister) *fixture {
	t.Helper()
	f := &fixture{client: fake.NewClientset(hpa), scales: &scalefake.FakeScaleClient{}, replicas: replicas, recorder: record.NewFakeRecorder(100)}
	f.scales.AddReactor("get", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: autoscalingv1.ScaleSpec{Replicas: f.replicas}, Status: autoscalingv1.ScaleStatus{Replicas: f.replicas, Selector: "app=web"}}, nil
	})
	f.scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.replicas = sc.Spec.Replicas
		return true, sc, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	factory := informers.NewSharedInformerFactory(f.client, 0)
	for _, p := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(f.client, f.scales, resettable{mapper}, metrics, factory, Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Recorder: f.recorder, Clock: clocktesting.NewFakePassiveClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func testHPA(metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	if len(metrics) == 0 {
		metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 10, Metrics: metrics}}
}

// testPods returns n ready pods each requesting 1 CPU, and a metrics source in which
// each uses usage millicores.
func testPods(n int, usage int64) ([]*corev1.Pod, fixedMetrics) {
	var pods []*corev1.Pod
	m := fixedMetrics{usage: map[string]int64{}}
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		pods = append(pods, testPod(name, ready(1000, usage)))
		m.usage[name] = usage
	}
	return pods, m
}

func (f *fixture) status(t testing.TB) autoscalingv2.HorizontalPodAutoscalerStatus {
	t.Helper()
	h, err := f.client.AutoscalingV2().HorizontalPodAutoscalers("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return h.Status
}

func condition(s autoscalingv2.HorizontalPodAutoscalerStatus, typ autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestReconcile(t *testing.T) {
	pods, hot := testPods(2, 900)
	pods3, _ := testPods(3, 0)
	warmPods, warm := testPods(2, 540) // 54 % of a 50 % target: ratio 1.08
	mildPods, mild := testPods(2, 600) // ratio 1.2
	podsMetric := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}
	cases := []struct {
		name         string
		hpa          *autoscalingv2.HorizontalPodAutoscaler
		replicas     int32
		pods         []*corev1.Pod
		metrics      PodMetricsLister
		wantReplicas int32
		wantDesired  int32
		wantCurrent  string // the first metric's current utilization, "" = none
		wantConds    map[autoscalingv2.HorizontalPodAutoscalerConditionType]string
		wantEvents   []string
		wantErr      bool
		tolerance    *float64          // Options.Tolerance (nil = the default)
		otherHPAs    map[string]string // other HPAs in default → their targets' selectors
	}{
		{name: "scale up", hpa: testHPA(), replicas: 2, pods: pods, metrics: hot, wantReplicas: 4, wantDesired: 4, wantCurrent: "90",
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True/SucceededRescale", autoscalingv2.ScalingActive: "True/ValidMetricFound", autoscalingv2.ScalingLimited: "False/DesiredWithinRange"},
			wantEvents: []string{"Normal SuccessfulRescale New size: 4; reason: cpu resource utilization (percentage of request) above target"}},
		{name: "scale down is stabilized for a new HPA", hpa: testHPA(), replicas: 3, pods: pods3, metrics: fixedMetrics{usage: map[string]int64{"web-0": 0, "web-1": 0, "web-2": 0}},
			wantReplicas: 3, wantDesired: 3, wantCurrent: "0",
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True/ScaleDownStabilized", autoscalingv2.ScalingActive: "True/ValidMetricFound"}},
		{name: "above max", hpa: testHPA(), replicas: 12, pods: pods, metrics: hot, wantReplicas: 10, wantDesired: 10,
			wantEvents: []string{"Normal SuccessfulRescale New size: 10; reason: Current number of replicas above Spec.MaxReplicas"}},
		{name: "target at zero", hpa: testHPA(), replicas: 0, pods: pods, metrics: hot, wantReplicas: 0, wantDesired: 0,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/ScalingDisabled"}},
		{name: "no metrics", hpa: testHPA(), replicas: 2, pods: pods, metrics: fixedMetrics{err: errors.New("the server could not find the requested resource")},
			wantReplicas: 2, wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True/SucceededGetScale", autoscalingv2.ScalingActive: "False/FailedGetResourceMetric"},
			wantEvents: []string{"Warning FailedGetResourceMetric failed to get cpu utilization: unable to fetch metrics from resource metrics API",
				"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1)"}},
		{name: "a pods metric", hpa: testHPA(podsMetric), replicas: 2, pods: pods, metrics: hot, wantReplicas: 2, wantErr: true,
			wantConds:  map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/FailedGetPodsMetric"},
			wantEvents: []string{"Warning FailedGetPodsMetric failed to get pods metric value: wasmplane serves no custom"}},
		{name: "a failing pods metric beside a cpu metric that scales up", hpa: testHPA(testHPA().Spec.Metrics[0], podsMetric), replicas: 2, pods: pods, metrics: hot,
			wantReplicas: 4, wantDesired: 4, wantCurrent: "90", wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "True/ValidMetricFound"}},
		{name: "within the default tolerance: no scaling", hpa: testHPA(), replicas: 2, pods: warmPods, metrics: warm,
			wantReplicas: 2, wantDesired: 2, wantCurrent: "54",
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "True/ValidMetricFound"}},
		{name: "tolerance 0 scales on any distance", hpa: testHPA(), replicas: 2, pods: warmPods, metrics: warm, tolerance: ptr.To(0.0),
			wantReplicas: 3, wantDesired: 3, wantCurrent: "54"},
		{name: "outside the default tolerance: scaling", hpa: testHPA(), replicas: 2, pods: mildPods, metrics: mild,
			wantReplicas: 3, wantDesired: 3, wantCurrent: "60"},
		{name: "within a wider tolerance: no scaling", hpa: testHPA(), replicas: 2, pods: mildPods, metrics: mild, tolerance: ptr.To(0.25),
			wantReplicas: 2, wantDesired: 2, wantCurrent: "60"},
		{name: "another HPA on the same pods: AmbiguousSelector, no scaling", hpa: testHPA(), replicas: 2, pods: pods, metrics: hot,
			otherHPAs: map[string]string{"web-too": "app=web"}, wantReplicas: 2, wantErr: true,
			wantConds:  map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/AmbiguousSelector"},
			wantEvents: []string{"Warning AmbiguousSelector pods by selector app=web are controlled by multiple HPAs: [default/web default/web-too]"}},
		{name: "another HPA on other pods: scaling", hpa: testHPA(), replicas: 2, pods: pods, metrics: hot,
			otherHPAs: map[string]string{"api": "app=api"}, wantReplicas: 4, wantDesired: 4, wantCurrent: "90",
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "True/ValidMetricFound"}},
		{name: "unknown kind", hpa: func() *autoscalingv2.HorizontalPodAutoscaler {
			h := testHPA()
			h.Spec.ScaleTargetRef.Kind = "Widget"
			return h
		}(), replicas: 2, pods: pods, metrics: hot, wantReplicas: 2, wantErr: true,
			wantConds:  map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "False/FailedGetScale"},
			wantEvents: []string{"Warning FailedGetScale unable to determine resource for scale target reference"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.hpa, tc.replicas, tc.pods, tc.metrics)
			if tc.tolerance != nil {
				f.c.opts.Tolerance = tc.tolerance
			}
			// The HPA informer registers every HPA; the others' targets are known.
			f.c.selectors.register(tc.hpa.Namespace, tc.hpa.Name)
			for name, sel := range tc.otherHPAs {
				parsed, err := labels.Parse(sel)
				if err != nil {
					t.Fatal(err)
				}
				f.c.selectors.register("default", name)
				f.c.selectors.put("default", name, parsed)
			}
			err := f.c.reconcile(context.Background(), tc.hpa.DeepCopy())
			if (err != nil) != tc.wantErr {
				t.Fatalf("reconcile: %v (want an error: %v)", err, tc.wantErr)
			}
			if f.replicas != tc.wantReplicas {
				t.Errorf("target at %d replicas, want %d", f.replicas, tc.wantReplicas)
			}
			st := f.status(t)
			if !tc.wantErr && (st.DesiredReplicas != tc.wantDesired || st.CurrentReplicas != tc.replicas) {
				t.Errorf("status replicas current %d desired %d, want %d %d", st.CurrentReplicas, st.DesiredReplicas, tc.replicas, tc.wantDesired)
			}
			if tc.wantDesired != tc.replicas && !tc.wantErr && st.LastScaleTime == nil {
				t.Error("no lastScaleTime after a rescale")
			}
			if tc.wantCurrent != "" {
				if len(st.CurrentMetrics) == 0 || st.CurrentMetrics[0].Resource == nil || st.CurrentMetrics[0].Resource.Current.AverageUtilization == nil ||
					fmt.Sprint(*st.CurrentMetrics[0].Resource.Current.AverageUtilization) != tc.wantCurrent {
					t.Errorf("current metrics %+v, want utilization %s", st.CurrentMetrics, tc.wantCurrent)
				}
			}
			for typ, want := range tc.wantConds {
				if got := condition(st, typ); got != want {
					t.Errorf("condition %s = %q, want %q (%+v)", typ, got, want, st.Conditions)
				}
			}
			events := f.events()
			for _, want := range tc.wantEvents {
				found := false
				for _, e := range events {
					found = found || strings.HasPrefix(e, want)
				}
				if !found {
					t.Errorf("no event %q in %q", want, events)
				}
			}
		})
	}
}

// One reconcile of an HPA over 100 pods: metrics read, replicas computed, the target
// read (and scaled) and the status written, with fake clients. "steady" is the common
// case of usage at the target: nothing to scale, the status unchanged and not written;
// "rescale" scales and writes the status (most of its time is the fake clientset's
// object tracker).
func BenchmarkReconcile100Pods(b *testing.B) {
	for _, bc := range []struct {
		name  string
		usage int64
	}{{"steady", 500}, {"rescale", 900}} {
		b.Run(bc.name, func(b *testing.B) {
			pods, m := testPods(100, bc.usage)
			hpa := testHPA()
			hpa.Spec.MaxReplicas = 1000
			f := newFixture(b, hpa, 100, pods, m)
			f.c.recorder = &record.FakeRecorder{} // drops events: a buffered one would fill up
			// A sync period passes between reconciles, as in a cluster, so that the
			// recommendations kept stay those of the stabilization window.
			clk := clocktesting.NewFakeClock(t0)
			f.c.clock = clk
			ctx := context.Background()
			if err := f.c.reconcile(ctx, hpa.DeepCopy()); err != nil {
				b.Fatal(err)
			}
			hpa.Status = f.status(b)
			b.ReportAllocs()
			for b.Loop() {
				clk.Step(DefaultSyncPeriod)
				f.replicas = 100
				if err := f.c.reconcile(ctx, hpa.DeepCopy()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestNewTolerance(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	mapper := resettable{meta.NewDefaultRESTMapper(nil)}
	for _, tc := range []struct {
		tol     *float64
		want    float64
		wantErr bool
	}{{nil, DefaultTolerance, false}, {ptr.To(0.0), 0, false}, {ptr.To(0.25), 0.25, false}, {ptr.To(-0.1), 0, true}} {
		c, err := New(client, &scalefake.FakeScaleClient{}, mapper, fixedMetrics{}, factory, Options{Tolerance: tc.tol})
		if (err != nil) != tc.wantErr {
			t.Errorf("tolerance %v: err = %v, want an error %v", tc.tol, err, tc.wantErr)
			continue
		}
		if err == nil && *c.opts.Tolerance != tc.want {
			t.Errorf("tolerance %v: used %v, want %v", tc.tol, *c.opts.Tolerance, tc.want)
		}
	}
}
