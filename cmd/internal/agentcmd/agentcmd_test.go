package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentCredentials covers how the agent picks its credentials without a server: the
// API server must be verified unless the user says otherwise, and without --server only an
// earlier join's kubeconfig will do.
func TestAgentCredentials(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	ca := filepath.Join(root, "ca.crt")
	if err := os.WriteFile(ca, []byte("not checked here"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := agentRESTConfig(ctx, agentCredentials{apiURL: "https://127.0.0.1:1", token: "abcdef.0123456789abcdef", rootDir: root, nodeName: "n"})
	if err == nil || !strings.Contains(err.Error(), "--certificate-authority") {
		t.Fatalf("https without a CA: %v, want a demand for --certificate-authority", err)
	}
	_, err = agentRESTConfig(ctx, agentCredentials{rootDir: root, nodeName: "n"})
	if err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("no credentials at all: %v", err)
	}
	// A token that is not a bootstrap token is used as it is.
	rc, err := agentRESTConfig(ctx, agentCredentials{apiURL: "https://127.0.0.1:1", token: "static", caFile: ca, rootDir: root, nodeName: "n"})
	if err != nil || rc.BearerToken != "static" || string(rc.CAData) != "not checked here" {
		t.Fatalf("static token: %+v, %v", rc, err)
	}
	rc, err = agentRESTConfig(ctx, agentCredentials{apiURL: "https://127.0.0.1:1", token: "static", insecure: true, rootDir: root, nodeName: "n"})
	if err != nil || !rc.Insecure {
		t.Fatalf("explicitly insecure: %+v, %v", rc, err)
	}
}
