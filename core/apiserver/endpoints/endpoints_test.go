package endpoints

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/wasmplane/wasmplane/core/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestNegotiateOutput(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	tests := []struct {
		accept, wantType, wantAs string
		wantCode                 int32
	}{
		{"", "application/json", "", 0},
		{"*/*", "application/json", "", 0},
		{"application/yaml", "application/yaml", "", 0},
		{"application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf", "", 0},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json", "Table", 0},
		{"application/json;as=Table;v=v9;g=meta.k8s.io,application/json", "application/json", "", 0},
		{"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", "application/json", "", 0},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "application/vnd.kubernetes.protobuf", "PartialObjectMetadataList", 0},
		{"text/html", "", "", http.StatusNotAcceptable},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
			req.Header.Set("Accept", tt.accept)
			out, err := c.NegotiateOutput(req)
			if tt.wantCode != 0 {
				if ErrorToStatus(err).Code != tt.wantCode {
					t.Fatalf("err %v, want code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil || out.Info.MediaType != tt.wantType || out.As != tt.wantAs {
				t.Errorf("got %q as %q (%v), want %q as %q", out.Info.MediaType, out.As, err, tt.wantType, tt.wantAs)
			}
		})
	}
}

func TestNegotiateInput(t *testing.T) {
	c := NewCodecs(api.MustScheme())
	for ct, wantErr := range map[string]bool{
		"": false, "application/json": false, "application/json; charset=utf-8": false, "application/yaml": false,
		"application/vnd.kubernetes.protobuf": false, "text/plain": true, "garbage;;": true,
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/a/pods", nil)
		req.Header.Set("Content-Type", ct)
		_, err := c.NegotiateInput(req)
		if (err != nil) != wantErr {
			t.Errorf("%q: err %v, want error %v", ct, err, wantErr)
		}
		if err != nil && ErrorToStatus(err).Code != http.StatusUnsupportedMediaType {
			t.Errorf("%q: code %d, want 415", ct, ErrorToStatus(err).Code)
		}
	}
}

func TestQueryParameters(t *testing.T) {
	for v, want := range map[string]string{"": metav1.FieldValidationWarn, "Strict": "Strict", "Ignore": "Ignore", "bogus": ""} {
		got, err := fieldValidation(url.Values{"fieldValidation": {v}})
		if got != want || (want == "") != (err != nil) {
			t.Errorf("fieldValidation=%q: %q %v, want %q", v, got, err, want)
		}
	}
	if dry, err := isDryRun(url.Values{"dryRun": {"All"}}); !dry || err != nil {
		t.Errorf("dryRun=All: %v %v", dry, err)
	}
	if _, err := isDryRun(url.Values{"dryRun": {"Some"}}); !apierrors.IsBadRequest(err) {
		t.Errorf("dryRun=Some: %v, want BadRequest", err)
	}
	if err := validateListOptions(&metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsInvalid(err) {
		t.Errorf("resourceVersionMatch without resourceVersion: %v, want Invalid", err)
	}
	if err := validateListOptions(&metav1.ListOptions{Limit: -1}); !apierrors.IsInvalid(err) {
		t.Errorf("negative limit: %v, want Invalid", err)
	}
}

func TestApplyPatch(t *testing.T) {
	orig := `{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"containers":[{"name":"c","image":"x:1"},{"name":"d","image":"y:1"}]}}`
	tests := []struct {
		name  string
		pt    types.PatchType
		patch string
		check func(p *corev1.Pod) bool
		code  int32
	}{
		{"merge", types.MergePatchType, `{"metadata":{"labels":{"b":"2"}}}`,
			func(p *corev1.Pod) bool { return p.Labels["a"] == "1" && p.Labels["b"] == "2" }, 0},
		{"merge replaces lists", types.MergePatchType, `{"spec":{"containers":[{"name":"c","image":"x:2"}]}}`,
			func(p *corev1.Pod) bool { return len(p.Spec.Containers) == 1 }, 0},
		{"strategic merges lists by name", types.StrategicMergePatchType, `{"spec":{"containers":[{"name":"c","image":"x:2"}]}}`,
			func(p *corev1.Pod) bool { return len(p.Spec.Containers) == 2 && p.Spec.Containers[0].Image == "x:2" }, 0},
		{"json patch", types.JSONPatchType, `[{"op":"replace","path":"/spec/containers/1/image","value":"y:2"}]`,
			func(p *corev1.Pod) bool { return p.Spec.Containers[1].Image == "y:2" }, 0},
		{"json patch test fails", types.JSONPatchType, `[{"op":"test","path":"/metadata/name","value":"q"}]`, nil, http.StatusUnprocessableEntity},
		{"malformed json patch", types.JSONPatchType, `{"op":`, nil, http.StatusBadRequest},
		{"malformed merge patch", types.MergePatchType, `{`, nil, http.StatusBadRequest},
		{"malformed strategic patch", types.StrategicMergePatchType, `[1]`, nil, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := applyPatch(tt.pt, []byte(orig), []byte(tt.patch), &corev1.Pod{})
			if tt.code != 0 {
				if err == nil || ErrorToStatus(err).Code != tt.code {
					t.Fatalf("err %v, want code %d", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var p corev1.Pod
			if err := json.Unmarshal(out, &p); err != nil || !tt.check(&p) {
				t.Errorf("patched object wrong (%v): %s", err, out)
			}
		})
	}
}
