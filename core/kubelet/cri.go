package kubelet

import (
	"context"
	"fmt"
	"time"

	cri "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// RuntimeRequestTimeout bounds every CRI call, the kubelet's --runtime-request-timeout
// default: creating a container may compile a large module first.
const RuntimeRequestTimeout = 2 * time.Minute

// Connect dials a CRI endpoint ("unix:///path.sock") for the runtime and image services.
func Connect(ctx context.Context, endpoint string) (cri.RuntimeService, cri.ImageManagerService, error) {
	// cri-client uses the connection timeout as the per-request timeout too.
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(RuntimeRequestTimeout).Build(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to CRI runtime %s: %w", endpoint, err)
	}
	img, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(endpoint).WithConnectionTimeout(RuntimeRequestTimeout).Build(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, nil, fmt.Errorf("connecting to CRI image service %s: %w", endpoint, err)
	}
	return rt, img, nil
}
