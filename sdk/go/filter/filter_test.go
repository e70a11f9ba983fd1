package filter

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

func def(key uint32, name, disk string) string {
	return `{"key":` + strconv.Itoa(int(key)) + `,"node":{"metadata":{"name":"` + name + `","labels":{"disk":"` + disk + `"}}}}`
}

// TestRegisterNodeVerdict: verdicts are judged as the host defines nodes (once per
// document), follow a slot's new node, carry the rejected nodes' reasons by request
// index, are refused for forgotten, reset or never defined slots, and the JSON framing
// judges every node afresh. The pod is never decoded (a broken one does not matter).
func TestRegisterNodeVerdict(t *testing.T) {
	calls := 0
	RegisterNodeVerdict(func(n *abi.Node) (bool, string) {
		calls++
		if d := n.Metadata.Labels["disk"]; d != "ssd" {
			return false, "disk " + d
		}
		return true, ""
	})
	steps := []struct {
		name      string
		req       []byte
		want      string // the answer after the header; "" wants an error
		wantCalls int
	}{
		{"define", guest.PackedRequest([]uint32{1, 0}, `{"pod":{"spec":7},"reset":true,"define":[`+def(0, "a", "ssd")+`,`+def(1, "b", "hdd")+`]}`), "\x00\x01" + `{"0":"disk hdd"}`, 2},
		{"again, all pass", guest.PackedRequest([]uint32{0, 0}, `{"pod":{}}`), "\x01\x01", 2},
		{"changed", guest.PackedRequest([]uint32{1, 0, 1}, `{"pod":{},"forget":[1],"define":[`+def(1, "b", "nvme")+`]}`), "\x00\x01\x00" + `{"0":"disk nvme","2":"disk nvme"}`, 3},
		{"forgotten", guest.PackedRequest([]uint32{0}, `{"pod":{},"forget":[0]}`), "", 3},
		{"never defined", guest.PackedRequest([]uint32{5}, `{"pod":{}}`), "", 3},
		{"reset", guest.PackedRequest([]uint32{1}, `{"pod":{},"reset":true}`), "", 3},
		{"json", []byte(`{"pod":{},"nodes":[{"metadata":{"labels":{"disk":"ssd"}}},{"metadata":{}}]}`), `{"pass":[true,false],"reasons":["","disk "]}`, 5},
	}
	for _, st := range steps {
		out, err := handler(st.req, nil)
		if st.want == "" {
			if err == nil || !strings.Contains(err.Error(), "never defined") {
				t.Fatalf("%s: answer %q, err %v; want the undefined slot refused", st.name, out, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := string(out)
		if st.name != "json" {
			if got[:4] != abi.PackedMagic || int(binary.LittleEndian.Uint32(out[4:])) != int(binary.LittleEndian.Uint32(st.req[4:])) {
				t.Fatalf("%s: answer %q", st.name, out)
			}
			got = got[8:]
		}
		if got != st.want {
			t.Fatalf("%s: answer %q, want %q", st.name, got, st.want)
		}
		if calls != st.wantCalls {
			t.Fatalf("%s: judge ran %d times, want %d", st.name, calls, st.wantCalls)
		}
	}
}
