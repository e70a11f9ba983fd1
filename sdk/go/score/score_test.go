package score

import (
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmplane/wasmplane/sdk/go/abi"
	"github.com/wasmplane/wasmplane/sdk/go/internal/guest"
)

func node(key uint32, name, score string) string {
	return `{"key":` + strconv.Itoa(int(key)) + `,"node":{"metadata":{"name":"` + name + `","labels":{"s":"` + score + `"}}}}`
}

// TestRegisterNodeScore: scores are computed as the host defines nodes (once per
// document), follow a slot's new node, are refused for forgotten, reset or never
// defined slots, and the JSON framing scores every node afresh.
func TestRegisterNodeScore(t *testing.T) {
	calls := 0
	RegisterNodeScore(func(n *abi.Node) int64 {
		calls++
		v, _ := strconv.ParseInt(n.Metadata.Labels["s"], 10, 64)
		return v
	})
	steps := []struct {
		name      string
		req       []byte
		want      []int64 // nil: an error is wanted
		wantCalls int
	}{
		{"define", guest.PackedRequest([]uint32{1, 0}, `{"pod":{},"reset":true,"define":[`+node(0, "a", "10")+`,`+node(1, "b", "20")+`]}`), []int64{20, 10}, 2},
		{"again", guest.PackedRequest([]uint32{0, 1, 0}, `{"pod":{}}`), []int64{10, 20, 10}, 2},
		{"changed", guest.PackedRequest([]uint32{1}, `{"pod":{},"forget":[1],"define":[`+node(1, "b", "30")+`]}`), []int64{30}, 3},
		{"sentinel", guest.PackedRequest([]uint32{2}, `{"pod":{},"define":[`+node(2, "c", strconv.FormatInt(math.MinInt64, 10))+`]}`), []int64{math.MinInt64 + 1}, 4},
		{"forgotten", guest.PackedRequest([]uint32{0}, `{"pod":{},"forget":[0]}`), nil, 4},
		{"never defined", guest.PackedRequest([]uint32{9}, `{"pod":{}}`), nil, 4},
		{"reset", guest.PackedRequest([]uint32{1}, `{"pod":{},"reset":true}`), nil, 4},
		{"json", []byte(`{"pod":{},"nodes":[{"metadata":{"labels":{"s":"7"}}}]}`), []int64{7}, 5},
	}
	for _, st := range steps {
		out, err := handler(st.req, nil)
		if st.want == nil {
			if err == nil || !strings.Contains(err.Error(), "never defined") {
				t.Fatalf("%s: answer %q, err %v; want the undefined slot refused", st.name, out, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var got []int64
		if st.name == "json" {
			if string(out) != `{"scores":[7]}` {
				t.Fatalf("json: %s", out)
			}
			got = st.want
		} else {
			if string(out[:4]) != abi.PackedMagic || int(binary.LittleEndian.Uint32(out[4:])) != len(st.want) || len(out) != 8+8*len(st.want) {
				t.Fatalf("%s: answer %q", st.name, out)
			}
			for i := range st.want {
				got = append(got, int64(binary.LittleEndian.Uint64(out[8+8*i:])))
			}
		}
		for i := range st.want {
			if got[i] != st.want[i] {
				t.Fatalf("%s: scores %v, want %v", st.name, got, st.want)
			}
		}
		if calls != st.wantCalls {
			t.Fatalf("%s: the score function ran %d times, want %d", st.name, calls, st.wantCalls)
		}
	}
}
