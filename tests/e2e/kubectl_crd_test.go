package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
	"k8s.io/apimachinery/pkg/util/wait"
)

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.tools.example.com
spec:
  group: tools.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gdg], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: GadgetSpec is what a gadget should be.
            properties:
              size: {type: string, description: How big the gadget is.}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
`

const gadget = `apiVersion: tools.example.com/v1
kind: Gadget
metadata: {name: g1}
spec: {size: large, replicas: 1}
`

// TestKubectlCustomResources drives a CRD through kubectl: api-resources before, after
// creation and after deletion, explain, get with printer columns and short name, get all
// through the category, and scale.
func TestKubectlCustomResources(t *testing.T) {
	srv := testserver.StartAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	k := &kubectl{kubeconfig: srv.KubeconfigPath(), home: t.TempDir(), ns: "default"}

	out, err := k.run(t, "", "api-resources", "--api-group=tools.example.com", "--no-headers")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("api-resources before the CRD: %q %v", out, err)
	}
	if out, err := k.run(t, "", "apply", "-f", writeFile(t, dir, "crd.yaml", gadgetCRD)); err != nil {
		t.Fatalf("apply CRD: %s %v", out, err)
	}
	if out, err := k.run(t, "", "wait", "--for=condition=Established", "--timeout=30s", "crd/gadgets.tools.example.com"); err != nil {
		t.Fatalf("wait Established: %s %v", out, err)
	}
	out, err = k.run(t, "", "api-resources", "--api-group=tools.example.com", "--no-headers")
	if err != nil || !strings.Contains(out, "gadgets") || !strings.Contains(out, "gdg") || !strings.Contains(out, "Gadget") {
		t.Fatalf("api-resources after the CRD: %q %v", out, err)
	}
	if out, err := k.run(t, "", "apply", "-f", writeFile(t, dir, "gadget.yaml", gadget)); err != nil {
		t.Fatalf("apply gadget: %s %v", out, err)
	}
	out, err = k.run(t, "", "get", "gdg")
	if err != nil || !strings.Contains(out, "SIZE") || !strings.Contains(out, "REPLICAS") || !strings.Contains(out, "large") {
		t.Fatalf("get gdg: %q %v", out, err)
	}
	out, err = k.run(t, "", "get", "all")
	if err != nil || !strings.Contains(out, "gadget.tools.example.com/g1") {
		t.Fatalf("get all: %q %v", out, err)
	}
	out, err = k.run(t, "", "explain", "gadgets.spec")
	if err != nil || !strings.Contains(out, "GadgetSpec is what a gadget should be.") || !strings.Contains(out, "How big the gadget is.") {
		t.Fatalf("explain gadgets.spec: %q %v", out, err)
	}
	if out, err := k.run(t, "", "scale", "gadget/g1", "--replicas=3"); err != nil {
		t.Fatalf("scale: %s %v", out, err)
	}
	out, err = k.run(t, "", "get", "gadget", "g1", "-o", "jsonpath={.spec.replicas}")
	if err != nil || out != "3" {
		t.Fatalf("replicas after scale: %q %v", out, err)
	}
	if out, err := k.run(t, "", "delete", "crd", "gadgets.tools.example.com", "--timeout=60s"); err != nil {
		t.Fatalf("delete CRD: %s %v", out, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err := k.run(t, "", "api-resources", "--api-group=tools.example.com", "--no-headers")
		return err == nil && strings.TrimSpace(out) == "", nil
	})
	if err != nil {
		t.Fatalf("gadgets still in api-resources after the CRD is deleted: %v", err)
	}
}
