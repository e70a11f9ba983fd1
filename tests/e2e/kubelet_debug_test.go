package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// ephemeralStatus is the status of the pod's ephemeral container name, nil until the
// kubelet reports one.
func ephemeralStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

// terminated is a condition on the pod's ephemeral container name.
func terminated(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, name)
		return cs != nil && cs.State.Terminated != nil
	}
}

// addEphemeral adds ec to the pod through pods/ephemeralcontainers, as client-go does.
func (e *kubeletEnv) addEphemeral(pod string, ec corev1.EphemeralContainer) (*corev1.Pod, error) {
	var out *corev1.Pod
	// The kubelet writes the pod's status meanwhile: an update from a read just before
	// may conflict, as in Kubernetes; read again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := e.cs.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
		out, err = e.cs.CoreV1().Pods("default").UpdateEphemeralContainers(context.Background(), pod, p, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// wantInvalid checks that err is a 422 with a cause on field.
func kubeletWantInvalid(t *testing.T, what string, err error, field, message string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%s: %v, want 422 Invalid", what, err)
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
	}
	t.Fatalf("%s: %v, want a cause on %s saying %q", what, err, field, message)
}

// ctx is a test's context for one kubectl run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestEphemeralContainers adds ephemeral containers to a running pod through client-go
// and the real kubectl debug, and checks what the API server refuses.
func TestEphemeralContainers(t *testing.T) {
	e := kubeletSetup(t)
	e.execPod("box")
	before := e.waitPod("box", "running", 10*time.Second, running)

	// What the API refuses.
	_, err := e.cs.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "early"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{container("main", "toolbox", "true")},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "dbg", Image: "toolbox:latest"}}}}}, metav1.CreateOptions{})
	kubeletWantInvalid(t, "create with ephemeral containers", err, "spec.ephemeralContainers", "cannot be set on create")
	_, err = e.addEphemeral("box", corev1.EphemeralContainer{TargetContainerName: "nope",
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: "toolbox:latest"}})
	kubeletWantInvalid(t, "unknown target", err, "spec.ephemeralContainers[0].targetContainerName", "nope")
	_, err = e.addEphemeral("box", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "main", Image: "toolbox:latest"}})
	kubeletWantInvalid(t, "a container's name", err, "spec.ephemeralContainers[0].name", "Duplicate value")

	// client-go: one that finishes, with env and a target, and one that keeps running.
	_, err = e.addEphemeral("box", corev1.EphemeralContainer{TargetContainerName: "main", EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "dbg", Image: "toolbox:latest", Args: []string{"echo", "hello from $(WHO)"}, Env: []corev1.EnvVar{{Name: "WHO", Value: "the debugger"}}}})
	if err != nil {
		t.Fatalf("adding an ephemeral container: %v", err)
	}
	p := e.waitPod("box", "dbg terminated", 30*time.Second, terminated("dbg"))
	if cs := ephemeralStatus(p, "dbg"); cs.State.Terminated.ExitCode != 0 || cs.Ready || cs.ContainerID == "" || cs.Image != "toolbox:latest" {
		t.Errorf("dbg status %+v", cs)
	}
	if out, err := e.logs("box", &corev1.PodLogOptions{Container: "dbg"}); err != nil || out != "hello from the debugger\n" {
		t.Errorf("dbg logs %q, %v", out, err)
	}
	if _, err = e.addEphemeral("box", corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "long", Image: "toolbox:latest", Args: []string{"sleep", "1h"}}}); err != nil {
		t.Fatalf("adding a second ephemeral container: %v", err)
	}
	p = e.waitPod("box", "long running", 30*time.Second, func(p *corev1.Pod) bool {
		cs := ephemeralStatus(p, "long")
		return cs != nil && cs.State.Running != nil
	})
	// The pod carries on: same container, still ready, dbg not restarted.
	if main := p.Status.ContainerStatuses[0]; main.ContainerID != before.Status.ContainerStatuses[0].ContainerID || main.RestartCount != 0 || !running(p) {
		t.Errorf("the pod's container changed: %+v", main)
	}
	if cs := ephemeralStatus(p, "dbg"); cs.RestartCount != 0 || cs.State.Terminated == nil || ephemeralStatus(p, "long").Ready {
		t.Errorf("ephemeral statuses %+v", p.Status.EphemeralContainerStatuses)
	}
	e.poll(20*time.Second, "Created and Started events about dbg", func(ctx context.Context) (bool, error) {
		l, err := e.cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=box"})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, ev := range l.Items {
			if ev.InvolvedObject.FieldPath == "spec.ephemeralContainers{dbg}" {
				seen[ev.Reason] = true
			}
		}
		return seen["Created"] && seen["Started"], nil
	})

	// Changed or removed: refused, through the subresource and through the pod. Each
	// write starts from a fresh read (the kubelet writes status meanwhile).
	pods := e.cs.CoreV1().Pods("default")
	write := func(change func(*corev1.Pod), update func(*corev1.Pod) error) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := pods.Get(context.Background(), "box", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			change(p)
			return update(p)
		})
	}
	viaSubresource := func(p *corev1.Pod) error {
		_, err := pods.UpdateEphemeralContainers(context.Background(), "box", p, metav1.UpdateOptions{})
		return err
	}
	err = write(func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Image = "counter:latest" }, viaSubresource)
	kubeletWantInvalid(t, "changing an ephemeral container", err, "spec.ephemeralContainers[dbg]", `existing ephemeral containers "dbg" may not be changed`)
	drop := func(p *corev1.Pod) { p.Spec.EphemeralContainers = p.Spec.EphemeralContainers[1:] }
	err = write(drop, viaSubresource)
	kubeletWantInvalid(t, "removing an ephemeral container", err, "spec.ephemeralContainers", `existing ephemeral containers "dbg" may not be removed`)
	err = write(drop, func(p *corev1.Pod) error {
		_, err := pods.Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	kubeletWantInvalid(t, "removing one by a pod update", err, "spec", "pod updates may not change fields")

	// The real kubectl debug: non-interactive then logs, with a target.
	out, stderr, err := e.kubectlRun("debug", "box", "--image=toolbox:latest", "-c", "kdbg", "--target=main", "--", "toolbox", "echo", "from kubectl debug")
	if err != nil {
		t.Fatalf("kubectl debug: %v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(out+stderr, "Targeting container \"main\"") {
		t.Errorf("kubectl debug said %q %q", out, stderr)
	}
	e.waitPod("box", "kdbg terminated", 30*time.Second, terminated("kdbg"))
	if out, stderr, err := e.kubectlRun("logs", "box", "-c", "kdbg"); err != nil || out != "from kubectl debug\n" {
		t.Errorf("kubectl logs -c kdbg: %q %s %v", out, stderr, err)
	}
	// kubectl debug -i attaches to the new container: the guest reads what kubectl sends
	// (it blocks until then, so its output comes after the attach) and kubectl shows
	// what it writes.
	cmd := e.kubectl(ctx(t), "debug", "-i", "box", "--image=toolbox:latest", "-c", "idbg", "--", "toolbox", "dd", "bs=6", "count=1")
	cmd.Stdin = strings.NewReader("typed\n")
	combined, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(combined), "typed\n") || strings.Contains(string(combined), "falling back") {
		t.Errorf("kubectl debug -i: %v\n%s", err, combined)
	}
	if out, err := e.logs("box", &corev1.PodLogOptions{Container: "idbg"}); err != nil || out != "typed\n" {
		t.Errorf("idbg logs %q, %v", out, err)
	}
	// kubectl debug node/: a pod on the node with the host's namespaces, which a WASI
	// guest does not have; it runs as any other pod there.
	out, stderr, err = e.kubectlRun("debug", "node/"+nodeName, "--image=toolbox:latest", "--", "toolbox", "echo", "on the node")
	m := regexp.MustCompile(`Creating debugging pod (\S+) with container`).FindStringSubmatch(out + stderr)
	if err != nil || m == nil {
		t.Fatalf("kubectl debug node/: %v\n%s%s", err, out, stderr)
	}
	e.waitPod(m[1], "Succeeded", 30*time.Second, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if out, err := e.logs(m[1], &corev1.PodLogOptions{}); err != nil || out != "on the node\n" {
		t.Errorf("node debugging pod logs %q, %v", out, err)
	}
}
