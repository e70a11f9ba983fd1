package guest

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// TestDecodeNodeMatchesEncodingJSON checks that the hand-written node decoder gives
// what encoding/json gives, on the host's compact form and on forms it falls back on.
func TestDecodeNodeMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{"metadata":{"name":"node-1","uid":"u1","resourceVersion":"812","labels":{"zone":"a","kubernetes.io/hostname":"node-1"},"annotations":{"x":"y"}},` +
			`"spec":{"unschedulable":true,"taints":[{"key":"gpu","value":"true","effect":"NoSchedule"}]},` +
			`"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"3800m"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`,
		`{"metadata":{"name":"n"},"spec":{},"status":{}}`,
		`{}`,
		` { "metadata" : { "name" : "n" , "labels" : { } } , "spec" : { "taints" : [ ] } } `,
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"full","creationTimestamp":"2026-01-01T00:00:00Z","managedFields":[{"manager":"m","fieldsV1":{"f:x":{}}}]},` +
			`"spec":{"podCIDR":"10.0.0.0/24","taints":null},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}],"nodeInfo":{"kubeletVersion":"v1.37.2"},"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":null}]}}`,
		`{"metadata":{"name":"esc\"aped","labels":{"k":"caf\u00e9","ü":"v"}}}`,
		`{"Metadata":{"name":"case"}}`,
		`{"metadata":{"Name":"case"}}`,
		`{"metadata":{"labels":{"a":null}},"spec":{"unschedulable":null},"status":{"capacity":null}}`,
		`{"metadata":null,"spec":null,"status":null}`,
		`{"status":{"conditions":[null,{"type":"Ready"}]}}`,
	}
	for _, doc := range docs {
		var want abi.Node
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		got, err := decodeNode([]byte(doc), &interner{m: map[string]string{}})
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", doc, *got, want)
		}
	}
	for _, bad := range []string{`[]`, `{"metadata":{"name":5}}`, `{"spec":{"unschedulable":"yes"}}`, `{"metadata":`} {
		if _, err := decodeNode([]byte(bad), &interner{m: map[string]string{}}); err == nil {
			t.Errorf("%s: decoded, want an error", bad)
		}
	}
}

// TestKeyTable runs random puts, gets and removes against a map.
func TestKeyTable(t *testing.T) {
	var kt keyTable
	ref := map[uint64]*abi.Node{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		k := r.Uint64N(3000)
		switch r.IntN(3) {
		case 0:
			n := &abi.Node{}
			kt.put(k, n)
			ref[k] = n
		case 1:
			kt.remove(k)
			delete(ref, k)
		default:
			if kt.get(k) != ref[k] {
				t.Fatalf("step %d: get(%d) differs", i, k)
			}
		}
		if i%50000 == 0 {
			kt.reset()
			clear(ref)
		}
	}
	if kt.len() != len(ref) {
		t.Fatalf("len %d, want %d", kt.len(), len(ref))
	}
	for k, n := range ref {
		if kt.get(k) != n {
			t.Fatalf("get(%d) differs", k)
		}
	}
}

// TestDecodeSchedulingTable defines nodes, forgets one and resolves keys.
func TestDecodeSchedulingTable(t *testing.T) {
	table.reset()
	req, err := DecodeScheduling([]byte(`{"pod":{"metadata":{"name":"p"}},"reset":true,"define":[{"key":2,"node":{"metadata":{"name":"a"}}},{"node":{"metadata":{"name":"b"}},"key":4}],"nodes":[4,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Nodes) != 2 || req.Nodes[0].Metadata.Name != "b" || req.Nodes[1].Metadata.Name != "a" || req.Pod.Metadata.Name != "p" {
		t.Fatalf("got %+v", req)
	}
	if _, err := DecodeScheduling([]byte(`{"pod":{},"forget":[2],"nodes":[4, 2]}`)); err == nil {
		t.Fatal("a forgotten key resolved")
	}
	if _, err := DecodeScheduling([]byte(`{"pod":{},"define":[{"key":6,"node":null}],"nodes":[6]}`)); err == nil {
		t.Fatal("a null node was defined")
	}
	req, err = DecodeScheduling([]byte(`{"pod":{},"nodes":[{"metadata":{"name":"x"}}, {"metadata":{"name":"y"}}]}`))
	if err != nil || len(req.Nodes) != 2 || req.Nodes[1].Metadata.Name != "y" {
		t.Fatalf("documents without the table: %+v, %v", req, err)
	}
}
