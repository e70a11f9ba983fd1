package apiserver

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLiveLookups: a live LimitRange list is reused until liveTTL passes, empty answers
// too, per namespace, and the cache stays bounded.
func TestLiveLookups(t *testing.T) {
	l := &liveLookups{}
	now := time.Now()
	one := []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Name: "lr"}}}
	l.put("a", one, now)
	l.put("b", nil, now)
	steps := []struct {
		name   string
		ns     string
		at     time.Time
		wantOK bool
		want   int
	}{
		{"fresh", "a", now.Add(time.Second), true, 1},
		{"fresh empty", "b", now.Add(time.Second), true, 0},
		{"never looked up", "c", now, false, 0},
		{"expired", "a", now.Add(liveTTL + time.Second), false, 0},
	}
	for _, s := range steps {
		items, ok := l.get(s.ns, s.at)
		if ok != s.wantOK || len(items) != s.want {
			t.Errorf("%s: %d items, %v; want %d, %v", s.name, len(items), ok, s.want, s.wantOK)
		}
	}
	for i := range 3 * maxLiveLookups {
		l.put(string(rune('a'+i%26))+time.Duration(i).String(), nil, now)
	}
	if n := len(l.m); n > maxLiveLookups {
		t.Fatalf("%d entries kept, bound %d", n, maxLiveLookups)
	}
}
