package kubelet

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	kubeletserver "github.com/wasmplane/wasmplane/core/kubelet/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var _ kubeletserver.Streamer = (*Kubelet)(nil)

// podOnNode reads a pod this kubelet runs, as the kubelet's server does from its pod manager.
func (k *Kubelet) podOnNode(namespace, name string) (*corev1.Pod, error) {
	pod, err := k.lister.Pods(namespace).Get(name)
	if err != nil || pod.Spec.NodeName != k.cfg.NodeName {
		return nil, kubeletserver.NotFound("pod %q not found on node %s", namespace+"/"+name, k.cfg.NodeName)
	}
	return pod, nil
}

// runningContainerID is the runtime id of the pod's running container named name.
func (k *Kubelet) runningContainerID(ctx context.Context, pod *corev1.Pod, name string) (string, error) {
	rs, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return "", fmt.Errorf("reading pod %s/%s from the runtime: %w", pod.Namespace, pod.Name, err)
	}
	c := rs.Latest(name)
	if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		// The kubelet's words, which kubectl shows after "unable to upgrade connection:".
		return "", kubeletserver.NotFound("container not found (%q)", name)
	}
	return c.ID, nil
}

// runtimeURL parses the URL a CRI streaming call answered, or maps its gRPC error.
func runtimeURL(raw string, err error) (*url.URL, error) {
	if err != nil {
		code := http.StatusInternalServerError
		switch status.Code(err) {
		case codes.NotFound:
			code = http.StatusNotFound
		case codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented:
			code = http.StatusBadRequest
		case codes.ResourceExhausted:
			code = http.StatusTooManyRequests
		}
		msg := err.Error()
		if st, ok := status.FromError(err); ok {
			msg = st.Message()
		}
		return nil, &kubeletserver.Error{Code: code, Message: msg}
	}
	u, perr := url.Parse(raw)
	if perr != nil || u.Host == "" {
		return nil, fmt.Errorf("the container runtime answered an invalid streaming URL %q", raw)
	}
	return u, nil
}

// ExecURL implements kubeletserver.Streamer.
func (k *Kubelet) ExecURL(ctx context.Context, namespace, name, container string, cmd []string, opts kubeletserver.StreamOptions) (*url.URL, error) {
	pod, err := k.podOnNode(namespace, name)
	if err != nil {
		return nil, err
	}
	id, err := k.runningContainerID(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	resp, err := k.cfg.Runtime.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	return runtimeURL(resp.GetUrl(), err)
}

// AttachURL implements kubeletserver.Streamer.
func (k *Kubelet) AttachURL(ctx context.Context, namespace, name, container string, opts kubeletserver.StreamOptions) (*url.URL, error) {
	pod, err := k.podOnNode(namespace, name)
	if err != nil {
		return nil, err
	}
	id, err := k.runningContainerID(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	resp, err := k.cfg.Runtime.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id,
		Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	return runtimeURL(resp.GetUrl(), err)
}

// PortForwardURL implements kubeletserver.Streamer.
func (k *Kubelet) PortForwardURL(ctx context.Context, namespace, name string, ports []int32) (*url.URL, error) {
	pod, err := k.podOnNode(namespace, name)
	if err != nil {
		return nil, err
	}
	rs, err := k.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s from the runtime: %w", namespace, name, err)
	}
	if len(rs.Sandboxes) == 0 {
		return nil, kubeletserver.NotFound("pod %q has no sandbox on node %s", namespace+"/"+name, k.cfg.NodeName)
	}
	resp, err := k.cfg.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: rs.Sandboxes[0].ID, Port: ports})
	return runtimeURL(resp.GetUrl(), err)
}
