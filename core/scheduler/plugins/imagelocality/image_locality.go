// Package imagelocality is the ImageLocality plugin: nodes that already hold the pod's
// images score higher (by image size, scaled by how widely the image is spread).
package imagelocality

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/wasmplane/wasmplane/core/scheduler/framework"
	"github.com/wasmplane/wasmplane/core/scheduler/plugins/names"
	v1 "k8s.io/api/core/v1"
)

// Thresholds as in Kubernetes: below minThreshold an image counts for nothing, above
// maxContainerThreshold per container it counts fully.
const (
	mb                    int64 = 1024 * 1024
	minThreshold                = 23 * mb
	maxContainerThreshold       = 1000 * mb
)

// ImageLocality is the plugin.
type ImageLocality struct{ h framework.Handle }

// New is the plugin factory.
func New(_ context.Context, _ json.RawMessage, h framework.Handle) (framework.Plugin, error) {
	return &ImageLocality{h: h}, nil
}

// Name implements Plugin.
func (*ImageLocality) Name() string { return names.ImageLocality }

// normalizedImageName adds the ":latest" tag when none is given, as Kubernetes.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

const stateKey framework.StateKey = "PreScore" + names.ImageLocality

type preScoreState struct {
	// spread maps a normalized image to the fraction of nodes holding it.
	spread     map[string]float64
	containers int
}

// Clone implements StateData (the state is read-only, so sharing is safe).
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore computes, once per pod, how widely each of its images is spread over the nodes.
func (pl *ImageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	all := pl.h.SnapshotSharedLister().List()
	s := &preScoreState{spread: map[string]float64{}, containers: len(pod.Spec.InitContainers) + len(pod.Spec.Containers)}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			s.spread[normalizedImageName(c.Image)] = 0
		}
	}
	if len(all) > 0 {
		for _, ni := range all {
			if len(ni.ImageSizes) == 0 {
				continue
			}
			for img := range s.spread {
				if _, ok := ni.ImageSizes[img]; ok {
					s.spread[img]++
				}
			}
		}
		for img := range s.spread {
			s.spread[img] /= float64(len(all))
		}
	}
	state.Write(stateKey, s)
	return nil
}

// Score sums size × spread of the pod's images present on the node, then scales it
// between the thresholds into 0–100.
func (pl *ImageLocality) Score(_ context.Context, state *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, stateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var sum int64
	if len(ni.ImageSizes) > 0 {
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				img := normalizedImageName(c.Image)
				if size, ok := ni.ImageSizes[img]; ok {
					sum += int64(float64(size) * s.spread[img])
				}
			}
		}
	}
	maxThreshold := maxContainerThreshold * int64(s.containers)
	if sum < minThreshold {
		sum = minThreshold
	} else if sum > maxThreshold {
		sum = maxThreshold
	}
	if maxThreshold <= minThreshold {
		return 0, nil
	}
	return framework.MaxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold), nil
}

// ScoreExtensions implements ScorePlugin.
func (*ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }
