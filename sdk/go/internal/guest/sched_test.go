package guest

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
)

// TestDecodePacked defines nodes by slot, reuses a slot for a changed node, forgets,
// resets, and checks that Prepared recomputes exactly when a slot's node changes.
func TestDecodePacked(t *testing.T) {
	slotNodes = slotNodes[:0]
	calls := 0
	prep := NewPrepared(func(n *abi.Node) string { calls++; return n.Metadata.Name + "!" })
	names := func(s Scheduling) (out []string) {
		for i, n := range s.Req.Nodes {
			if got := prep.Get(&s, i); got != n.Metadata.Name+"!" {
				t.Fatalf("prepared %q for node %q", got, n.Metadata.Name)
			}
			out = append(out, n.Metadata.Name)
		}
		return out
	}
	s, err := DecodeAny(PackedRequest([]uint32{1, 0}, `{"pod":{"metadata":{"name":"p"}},"reset":true,"define":[{"key":0,"node":{"metadata":{"name":"a"}}},{"key":1,"node":{"metadata":{"name":"b"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Packed || s.Req.Pod.Metadata.Name != "p" || !reflect.DeepEqual(names(s), []string{"b", "a"}) || !reflect.DeepEqual(s.Slots, []uint32{1, 0}) || calls != 2 {
		t.Fatalf("got %+v, %d prepare calls", s, calls)
	}
	// Same nodes again: nothing is prepared anew.
	s, err = DecodeAny(PackedRequest([]uint32{0, 1}, `{"pod":{"metadata":{"name":"p"}}}`))
	if err != nil || !reflect.DeepEqual(names(s), []string{"a", "b"}) || calls != 2 {
		t.Fatalf("got %+v, %v, %d prepare calls", s, err, calls)
	}
	// b changed: its new document takes its slot; only it is prepared again.
	s, err = DecodeAny(PackedRequest([]uint32{0, 1}, `{"pod":{},"forget":[1],"define":[{"key":1,"node":{"metadata":{"name":"b2"}}}]}`))
	if err != nil || !reflect.DeepEqual(names(s), []string{"a", "b2"}) || calls != 3 {
		t.Fatalf("got %+v, %v, %d prepare calls", s, err, calls)
	}
	if _, err := DecodeAny(PackedRequest([]uint32{0}, `{"pod":{},"forget":[0]}`)); err == nil {
		t.Fatal("a forgotten slot resolved")
	}
	if _, err := DecodeAny(PackedRequest([]uint32{1}, `{"pod":{},"reset":true}`)); err == nil {
		t.Fatal("a slot resolved after reset")
	}
	for _, bad := range [][]byte{
		PackedRequest([]uint32{7}, `{"pod":{}}`),
		PackedRequest(nil, `{"pod":{},"define":[{"key":99999999,"node":{}}]}`),
		PackedRequest(nil, `not json`),
		[]byte(abi.PackedMagic + "\xff\xff\xff\x7f{}"),
		[]byte("\x00wp"),
	} {
		if _, err := DecodeAny(bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
	// A JSON request still decodes, without slots (Prepared then computes every time).
	s, err = DecodeAny([]byte(`{"pod":{},"nodes":[{"metadata":{"name":"x"}}]}`))
	if err != nil || s.Packed || s.Slots != nil || !reflect.DeepEqual(names(s), []string{"x"}) || calls != 4 {
		t.Fatalf("JSON request: %+v, %v, %d prepare calls", s, err, calls)
	}
}

// TestEncodePacked checks the packed answers' bytes.
func TestEncodePacked(t *testing.T) {
	hdr := func(n uint32) []byte { return binary.LittleEndian.AppendUint32([]byte(abi.PackedMagic), n) }
	want := hdr(2)
	want = binary.LittleEndian.AppendUint64(want, 5)
	want = binary.LittleEndian.AppendUint64(want, ^uint64(0))
	if got := EncodeScoresPacked(nil, []int64{5, -1}); string(got) != string(want) {
		t.Fatalf("scores: %q", got)
	}
	got := EncodeFilterPacked(nil, &abi.FilterResponse{Pass: []bool{true, false, false}, Reasons: []string{"", `no "x"`, ""}})
	if want := string(append(hdr(3), 1, 0, 0)) + `{"1":"no \"x\""}`; string(got) != want {
		t.Fatalf("filter: %q", got)
	}
	if got := EncodeFilterPacked(nil, &abi.FilterResponse{Pass: []bool{true}}); string(got) != string(append(hdr(1), 1)) {
		t.Fatalf("filter without reasons: %q", got)
	}
}
