package openapi

import (
	"os"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	s := testScheme(t)
	start := time.Now()
	svc, err := New(s, testResources(), "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build %v", time.Since(start))
	t.Logf("v2 %d bytes", len(svc.v2JSON.data))
	for k, d := range svc.v3Docs {
		t.Logf("v3 %s %d", k, len(d.json.data))
	}
	start = time.Now()
	rep, err := svc.v2Proto.get()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("proto %v %d", time.Since(start), len(rep.data))
	os.WriteFile("/tmp/v2.json", svc.v2JSON.data, 0o644)
	os.WriteFile("/tmp/v3core.json", svc.v3Docs["api/v1"].json.data, 0o644)
	os.WriteFile("/tmp/v3apps.json", svc.v3Docs["apis/apps/v1"].json.data, 0o644)
	os.WriteFile("/tmp/v3index.json", svc.v3Index.data, 0o644)
}
