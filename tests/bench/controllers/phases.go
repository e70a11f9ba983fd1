package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// figure is one measured value of a phase.
type figure struct {
	name   string
	value  float64
	format func(float64) string
}

func phaseNames() []string { return []string{"job", "daemonset", "statefulset", "endpointslice"} }

func runPhase(ctx context.Context, c *cluster, o options, phase, ns string) ([]figure, error) {
	switch phase {
	case "job":
		if err := c.ensureNodes(ctx, o.jobNodes); err != nil {
			return nil, err
		}
		return jobPhase(ctx, c, o, ns)
	case "daemonset":
		if err := c.ensureNodes(ctx, o.nodes); err != nil {
			return nil, err
		}
		return daemonSetPhase(ctx, c, o, ns)
	case "statefulset":
		if err := c.ensureNodes(ctx, o.nodes); err != nil {
			return nil, err
		}
		return statefulSetPhase(ctx, c, o, ns)
	case "endpointslice":
		if err := c.ensureNodes(ctx, max(o.jobNodes, 1)); err != nil {
			return nil, err
		}
		return endpointSlicePhase(ctx, c, o, ns)
	}
	return nil, fmt.Errorf("unknown phase %q", phase)
}

func seconds(v float64) string { return fmt.Sprintf("%.2f s", v) }

func template(app string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{Name: "work", Image: "sleeper:latest",
			ImagePullPolicy: corev1.PullIfNotPresent, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

// poll checks cond every 50 ms, a resolution well under the figures measured.
func poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, cond)
}

// jobPhase runs the Job to completion: its pods succeed as soon as they are bound, so
// the figure is the Job controller's pace (creating pods in slow-start batches, counting
// them, removing their tracking finalizers) and the scheduler's.
func jobPhase(ctx context.Context, c *cluster, o options, ns string) ([]figure, error) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "work"}, Spec: batchv1.JobSpec{
		Completions: ptr.To(int32(o.jobCompletions)), Parallelism: ptr.To(int32(o.jobPar)),
		Template: template("work", corev1.RestartPolicyNever)}}
	start := time.Now()
	if _, err := c.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the Job: %w", err)
	}
	var last *batchv1.Job
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		j, err := c.cs.BatchV1().Jobs(ns).Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = j
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("the Job failed: %s", cond.Message)
			}
		}
		return false, nil
	})
	el := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("waiting for the Job to complete (last status %+v): %w", status(last), err)
	}
	return []figure{{name: fmt.Sprintf("Job %d completions, parallelism %d, %d nodes: Complete", o.jobCompletions, o.jobPar, o.jobNodes),
		value: el.Seconds(), format: seconds}}, nil
}

func status(j *batchv1.Job) any {
	if j == nil {
		return nil
	}
	return j.Status
}

// daemonSetPhase rolls a DaemonSet out to every node.
func daemonSetPhase(ctx context.Context, c *cluster, o options, ns string) ([]figure, error) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: selector("agent"), Template: template("agent", corev1.RestartPolicyAlways)}}
	start := time.Now()
	if _, err := c.cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating the DaemonSet: %w", err)
	}
	var last appsv1.DaemonSetStatus
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		d, err := c.cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = d.Status
		n := int32(o.nodes)
		return d.Status.DesiredNumberScheduled == n && d.Status.NumberAvailable == n && d.Status.UpdatedNumberScheduled == n, nil
	})
	el := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("waiting for the DaemonSet (last status %+v): %w", last, err)
	}
	return []figure{{name: fmt.Sprintf("DaemonSet on %d nodes: all available", o.nodes), value: el.Seconds(), format: seconds}}, nil
}

// statefulSetPhase scales StatefulSets from 0 to o.sts replicas, OrderedReady (each
// replica waits for the one before it to be ready) and Parallel.
func statefulSetPhase(ctx context.Context, c *cluster, o options, ns string) ([]figure, error) {
	var figs []figure
	for _, policy := range []appsv1.PodManagementPolicyType{appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement} {
		name := map[appsv1.PodManagementPolicyType]string{appsv1.OrderedReadyPodManagement: "ordered", appsv1.ParallelPodManagement: "parallel"}[policy]
		sts := c.cs.AppsV1().StatefulSets(ns)
		set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(0)), Selector: selector(name), Template: template(name, corev1.RestartPolicyAlways),
			ServiceName: name, PodManagementPolicy: policy}}
		if _, err := sts.Create(ctx, set, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating StatefulSet %s: %w", name, err)
		}
		// Scale once the controller has seen the empty set, so that the clock times the
		// scale-up alone.
		if err := poll(ctx, func(ctx context.Context) (bool, error) {
			s, err := sts.Get(ctx, name, metav1.GetOptions{})
			return err == nil && s.Status.ObservedGeneration >= s.Generation, err
		}); err != nil {
			return nil, fmt.Errorf("waiting for StatefulSet %s to be observed: %w", name, err)
		}
		scale, err := sts.GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the scale of %s: %w", name, err)
		}
		scale.Spec.Replicas = int32(o.sts)
		start := time.Now()
		if _, err := sts.UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("scaling %s: %w", name, err)
		}
		var last appsv1.StatefulSetStatus
		err = poll(ctx, func(ctx context.Context) (bool, error) {
			s, err := sts.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = s.Status
			return s.Status.ReadyReplicas == int32(o.sts), nil
		})
		el := time.Since(start)
		if err != nil {
			return nil, fmt.Errorf("waiting for StatefulSet %s (last status %+v): %w", name, last, err)
		}
		figs = append(figs, figure{name: fmt.Sprintf("StatefulSet 0 → %d, %s: all ready", o.sts, policy), value: el.Seconds(), format: seconds})
	}
	return figs, nil
}
