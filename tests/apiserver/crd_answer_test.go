package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/tests/internal/testserver"
)

// TestCustomCreateAnswer: the answer to a custom object's create is that object exactly as
// stored, with its resourceVersion, written as encoding/json writes it — whether the
// server writes it from the bytes it stored (the served version is the stored one and its
// content reads back exactly) or encodes it (another version, a float) — and the watch
// cache and etcd hold the same object.
func TestCustomCreateAnswer(t *testing.T) {
	e := newCRDEnv(t, testserver.StartAPI(t))
	e.establish(t, widgetsCRD())
	for i, tc := range []struct {
		name, version, free string
	}{
		{"stored version", "v1", `{"n":1,"s":"a<b>&c","list":[true,null,{"z":{}}]}`},
		{"stored version, a float", "v1", `{"n":1.5}`},
		{"another version", "v1beta1", `{"n":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("answer-%d", i)
			body := fmt.Sprintf(`{"apiVersion":"example.com/%s","kind":"Widget","metadata":{"name":%q,"labels":{"b":"2","a":"1"}},
			  "spec":{"immutableID":"id-%d","replicas":2,"port":"http","free":%s,"template":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t"}}}}`,
				tc.version, name, i, tc.free)
			path := "/apis/example.com/" + tc.version + "/namespaces/default/widgets"
			code, hdr, created := e.do(t, http.MethodPost, path, "application/json", "application/json", body)
			if code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, created)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var answer map[string]any
			if err := json.Unmarshal(created, &answer); err != nil {
				t.Fatalf("answer %s: %v", created, err)
			}
			// encoding/json's own writing of the same content: sorted keys, its escapes.
			want, err := json.Marshal(answer)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(created, append(want, '\n')) {
				t.Errorf("answer\n%s\nis not as encoding/json writes it:\n%s", created, want)
			}
			md := answer["metadata"].(map[string]any)
			if md["resourceVersion"] == nil || md["uid"] == nil || md["creationTimestamp"] == nil {
				t.Errorf("answer's metadata lacks server fields: %v", md)
			}
			if got := answer["apiVersion"]; got != "example.com/"+tc.version {
				t.Errorf("answer's apiVersion %v, want example.com/%s", got, tc.version)
			}
			for _, rv := range []string{"", md["resourceVersion"].(string)} {
				// From etcd (a quorum read) and from the watch cache once it holds the create.
				code, _, got := e.do(t, http.MethodGet, path+"/"+name+"?resourceVersion="+rv, "", "application/json", "")
				if code != http.StatusOK {
					t.Fatalf("get rv=%q: %d %s", rv, code, got)
				}
				var read map[string]any
				if err := json.Unmarshal(got, &read); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(read, answer) {
					t.Errorf("get rv=%q gives\n%s\nthe create answered\n%s", rv, got, created)
				}
			}
		})
	}
}
