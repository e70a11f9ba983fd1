package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/aggregated"
	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"k8s.io/apimachinery/pkg/util/wait"
)

const hpaV2 = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
`

// TestKubectlAPIServicesAndHPA reads the server's local APIServices through kubectl with
// kube-aggregator's columns, and HorizontalPodAutoscalers in both versions.
func TestKubectlAPIServicesAndHPA(t *testing.T) {
	srv := testserver.StartAPI(t)
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: "default"}
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = k.run(t, "", "get", "apiservices", "v1.apps")
		return err == nil && strings.Contains(out, "SERVICE") && strings.Contains(out, "AVAILABLE") &&
			strings.Contains(out, "Local") && strings.Contains(out, "True"), nil
	})
	if err != nil {
		t.Fatalf("kubectl get apiservices v1.apps: %q %v", out, err)
	}
	if out, err := k.run(t, "", "apply", "-f", writeFile(t, t.TempDir(), "hpa.yaml", hpaV2)); err != nil {
		t.Fatalf("apply hpa: %s %v", out, err)
	}
	out, err = k.run(t, "", "get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "yaml")
	if err != nil || !strings.Contains(out, "targetCPUUtilizationPercentage: 50") {
		t.Fatalf("v1 view of the HPA: %q %v", out, err)
	}
	out, err = k.run(t, "", "get", "hpa", "web")
	if err != nil || !strings.Contains(out, "Deployment/web") {
		t.Fatalf("kubectl get hpa: %q %v", out, err)
	}
}

// TestKubectlAggregatedAPI registers an aggregated API server with kubectl apply and
// reads its resources with kubectl get, as a user installing one would.
func TestKubectlAggregatedAPI(t *testing.T) {
	srv := testserver.StartAPI(t)
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: "default"}
	backend := aggregated.Start(t, srv.Clientset(t, true), "default", "wardle")
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: wardle, namespace: default}
spec: {type: ExternalName, externalName: localhost}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s.%s}
spec:
  group: %s
  version: %s
  groupPriorityMinimum: 2000
  versionPriority: 10
  caBundle: %s
  service: {namespace: default, name: wardle, port: %d}
`, aggregated.Version, aggregated.Group, aggregated.Group, aggregated.Version, base64.StdEncoding.EncodeToString(backend.CABundle), backend.Port)
	if out, err := k.run(t, "", "apply", "-f", writeFile(t, t.TempDir(), "apiservice.yaml", manifest)); err != nil {
		t.Fatalf("apply: %s %v", out, err)
	}
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = k.run(t, "", "get", "apiservices", aggregated.Version+"."+aggregated.Group)
		return err == nil && strings.Contains(out, "default/wardle") && strings.Contains(out, "True"), nil
	})
	if err != nil {
		t.Fatalf("kubectl get apiservices: %q %v", out, err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = k.run(t, "", "get", "flunders")
		return err == nil && strings.Contains(out, "seen-by-system-admin"), nil
	})
	if err != nil {
		t.Fatalf("kubectl get flunders: %q %v", out, err)
	}
	out, err = k.run(t, "", "api-resources", "--api-group", aggregated.Group)
	if err != nil || !strings.Contains(out, "flunders") {
		t.Fatalf("kubectl api-resources: %q %v", out, err)
	}
}
