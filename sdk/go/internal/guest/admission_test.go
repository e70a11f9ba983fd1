package guest

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// podCreate is a pod create as the API server sends it after the built-in plugins and
// defaulting.
const podCreate = `{"uid":"6a1f3c2e-4b5d-4e8f-9a0b-1c2d3e4f5a6b","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
	`"name":"p-1","namespace":"bench","operation":"CREATE","userInfo":{"username":"system:admin","groups":["system:masters","system:authenticated"]},` +
	`"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p-1","namespace":"bench","uid":"0f6c1e34","creationTimestamp":"2026-12-03T20:00:00Z","labels":{"team":"bench"},` +
	`"managedFields":[{"manager":"m","operation":"Update","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:team":{}}}}}]},` +
	`"spec":{"volumes":[{"name":"v","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}}],"defaultMode":420}}],` +
	`"containers":[{"name":"c","image":"hello:1","resources":{"requests":{"cpu":"100m"},"limits":{"memory":"64Mi"}},"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],` +
	`"initContainers":[{"name":"i","image":"init:latest","resources":{}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"nodeSelector":{"zone":"a"},` +
	`"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},{"key":"k","value":"v","effect":"NoSchedule"}],` +
	`"priority":-7,"priorityClassName":"low","schedulerName":"default-scheduler","affinity":{"nodeAffinity":{}}},"status":{}},"dryRun":true}`

// TestDecodeAdmissionMatchesEncodingJSON checks that the hand-written request decoder
// gives what encoding/json gives, on the host's form and on forms it falls back on.
func TestDecodeAdmissionMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		podCreate,
		`{}`,
		`null`,
		` { "uid" : "u" , "kind" : { "kind" : "Pod" } , "object" : { "a" : [ 1 , 2 ] } , "oldObject" : null , "options" : {"x":1} } `,
		`{"uid":"u","operation":"UPDATE","object":{"metadata":{}},"oldObject":{"metadata":{"name":"o"}},"subResource":"status"}`,
		`{"userInfo":{"username":"bob","uid":"42","groups":[],"extra":{"scopes":["a","b"],"none":null,"empty":[]}}}`,
		`{"userInfo":{"groups":null,"extra":null}}`,
		`{"name":"esc\"aped","namespace":"caf\u00e9","kind":{"kind":"ü"}}`,
		`{"UID":"case"}`,
		`{"kind":{"Kind":"case"}}`,
		`{"uid":"a","uid":"b","kind":{"group":"g"},"kind":{"version":"v"}}`,
		`{"dryRun":false,"unknown":{"deep":[{"x":"}"}]}}`,
		`{"uid":null,"name":null,"dryRun":null}`,
	}
	for _, doc := range docs {
		var want abi.AdmissionRequest
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var got abi.AdmissionRequest
		if err := DecodeAdmission([]byte(doc), &got); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", doc, got, want)
		}
	}
	for _, bad := range []string{`[]`, `{"uid":5}`, `{"dryRun":"yes"}`, `{"object":`, `{"uid":"u"} x`} {
		var r abi.AdmissionRequest
		if err := DecodeAdmission([]byte(bad), &r); err == nil {
			t.Errorf("%s: decoded, want an error", bad)
		}
	}
	// Nothing decoded aliases the input, which the host overwrites on the next call.
	in := []byte(podCreate)
	var r abi.AdmissionRequest
	if err := DecodeAdmission(in, &r); err != nil {
		t.Fatal(err)
	}
	want := string(r.Object)
	for i := range in {
		in[i] = ' '
	}
	if string(r.Object) != want || r.Kind.Kind != "Pod" || r.UID != "6a1f3c2e-4b5d-4e8f-9a0b-1c2d3e4f5a6b" {
		t.Fatalf("request aliases its input: %+v", r)
	}
}

// TestDecodeObjectMatchesEncodingJSON checks DecodeMeta and DecodePod against
// encoding/json.
func TestDecodeObjectMatchesEncodingJSON(t *testing.T) {
	var req abi.AdmissionRequest
	if err := json.Unmarshal([]byte(podCreate), &req); err != nil {
		t.Fatal(err)
	}
	docs := []string{
		string(req.Object),
		`{}`,
		`{"metadata":null,"spec":null}`,
		`{"metadata":{"labels":{"a":null},"annotations":{}},"spec":{"containers":null,"tolerations":[],"priority":null}}`,
		`{"spec":{"containers":[null,{"name":"c","resources":null}],"tolerations":[{"tolerationSeconds":null}]}}`,
		`{"spec":{"priority":2147483647}}`,
		`{"spec":{"tolerations":[{"tolerationSeconds":-5}]}}`,
		`{"metadata":{"name":"caf\u00e9"},"Spec":{"nodeName":"n"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"team":"x"}},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"c"}]}}}}`,
	}
	for _, doc := range docs {
		var want abi.Pod
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var got abi.Pod
		if err := DecodePod([]byte(doc), &got); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pod %s:\n got %+v\nwant %+v", doc, got, want)
		}
		var m abi.ObjectMeta
		if err := DecodeMeta([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(m, want.Metadata) {
			t.Errorf("meta %s:\n got %+v\nwant %+v", doc, m, want.Metadata)
		}
	}
	for _, bad := range []string{`[]`, `{"spec":{"priority":"1"}}`, `{"spec":{"priority":99999999999}}`, `{"spec":{"priority":1e3}}`, `{"metadata":{"labels":5}}`} {
		var p abi.Pod
		if err := DecodePod([]byte(bad), &p); err == nil {
			t.Errorf("%s: decoded, want an error", bad)
		}
	}
}

// TestEncodeAnswersMatchEncodingJSON checks that the hand-written answers are the JSON
// encoding/json writes (byte for byte but for how a control character is escaped).
func TestEncodeAnswersMatchEncodingJSON(t *testing.T) {
	validates := []abi.ValidateResponse{
		{Allowed: true},
		{},
		{Error: "boom \"quoted\"\n"},
		{Allowed: false, Code: 403, Reason: "Forbidden", Message: `label "team" is required; café`, Warnings: []string{"w1", "w2"},
			AuditAnnotations: map[string]string{"z": "1", "a": "2", "m": ""}},
		{Allowed: true, Warnings: []string{}, AuditAnnotations: map[string]string{}},
		{Allowed: true, Code: 200},
		{Allowed: true, Reason: "r"},
		{Allowed: true, Message: "m"},
		{Allowed: true, Warnings: []string{"w"}},
		{Allowed: true, AuditAnnotations: map[string]string{"k": "v"}},
		{Allowed: true, Error: "e"},
	}
	for _, v := range validates {
		want, _ := json.Marshal(v)
		got, err := EncodeValidate([]byte("junk"), &v)
		if err != nil || string(got) != "junk"+string(want) && !sameJSON(t, got[4:], want) {
			t.Errorf("%+v:\n got %s (%v)\nwant junk%s", v, got, err, want)
		}
	}
	mutates := []abi.MutateResponse{
		{Allowed: true},
		{Allowed: true, Patch: []abi.PatchOperation{{Op: "add", Path: "/metadata/labels/team", Value: json.RawMessage(`"web"`)},
			{Op: "move", From: "/a", Path: "/b"}, {Op: "remove", Path: "/c"}, {Op: "add", Path: "/d", Value: json.RawMessage(`{"x":[1,2]}`)}},
			Warnings: []string{"w"}, AuditAnnotations: map[string]string{"owner": "me"}},
		{Allowed: false, Code: 422, Message: "no"},
	}
	for _, m := range mutates {
		want, _ := json.Marshal(m)
		got, err := EncodeMutate(nil, &m)
		if err != nil || string(got) != string(want) {
			t.Errorf("%+v:\n got %s (%v)\nwant %s", m, got, err, want)
		}
	}
	bad := abi.MutateResponse{Allowed: true, Patch: []abi.PatchOperation{{Op: "add", Path: "/x", Value: json.RawMessage(`{oops`)}}}
	_, werr := json.Marshal(bad)
	if _, err := EncodeMutate(nil, &bad); err == nil || werr == nil || err.Error() != werr.Error() {
		t.Errorf("invalid patch value: got %v, want %v", err, werr)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// BenchmarkAdmission is the guest's share of a validate call on a pod create, natively:
// the hand-written path against encoding/json.
func BenchmarkAdmission(b *testing.B) {
	in := []byte(podCreate)
	resp := abi.ValidateResponse{Allowed: true}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for b.Loop() {
			var r abi.AdmissionRequest
			if err := DecodeAdmission(in, &r); err != nil {
				b.Fatal(err)
			}
			var p abi.Pod
			if err := DecodePod(r.Object, &p); err != nil {
				b.Fatal(err)
			}
			out, _ = EncodeValidate(out[:0], &resp)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r abi.AdmissionRequest
			if err := json.Unmarshal(in, &r); err != nil {
				b.Fatal(err)
			}
			var p abi.Pod
			if err := json.Unmarshal(r.Object, &p); err != nil {
				b.Fatal(err)
			}
			_, _ = json.Marshal(resp)
		}
	})
}
