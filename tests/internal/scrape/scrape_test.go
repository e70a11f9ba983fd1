package scrape

import (
	"maps"
	"testing"
)

func TestParseLabels(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr bool
	}{
		{``, map[string]string{}, false},
		{`kind="timeout",plugin="ns/loop"`, map[string]string{"kind": "timeout", "plugin": "ns/loop"}, false},
		{`a="x,y=z", b="q\"uote\\d\n"`, map[string]string{"a": "x,y=z", "b": "q\"uote\\d\n"}, false},
		{`a="x",`, map[string]string{"a": "x"}, false},
		{`a=x`, nil, true},
		{`a="x`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseLabels(tt.in)
			if (err != nil) != tt.wantErr || !tt.wantErr && !maps.Equal(got, tt.want) {
				t.Errorf("parseLabels(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
