package resources

import (
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStreamLocations(t *testing.T) {
	one := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
	two := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}}, Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	for _, tc := range []struct {
		sub, query string
		pod        *corev1.Pod
		want       string // kubelet path?query
		err        string
	}{
		{sub: "exec", query: "command=ls&command=-l", pod: one, want: "/exec/ns/p/main?command=ls&command=-l&error=1&output=1"},
		{sub: "exec", query: "command=cat&stdin=true&stdout=true&stderr=false&tty=true&container=main", pod: one,
			want: "/exec/ns/p/main?command=cat&input=1&output=1&tty=1"},
		{sub: "exec", query: "command=ls&container=init", pod: two, want: "/exec/ns/p/init?command=ls&error=1&output=1"},
		{sub: "exec", query: "command=ls", pod: two, err: "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]"},
		{sub: "exec", query: "command=ls&container=x", pod: one, err: "container x is not valid for pod p"},
		{sub: "exec", query: "", pod: one, err: "you must specify at least 1 command"},
		{sub: "exec", query: "command=ls&stdout=false&stderr=false", pod: one, err: "you must specify at least 1 of stdin, stdout, stderr"},
		{sub: "exec", query: "command=ls&stdin=maybe", pod: one, err: `invalid stdin "maybe"`},
		{sub: "attach", query: "stdin=1", pod: one, want: "/attach/ns/p/main?error=1&input=1&output=1"},
		{sub: "portforward", query: "ports=80&ports=8080", pod: one, want: "/portForward/ns/p?port=80&port=8080"},
		{sub: "portforward", query: "ports=70000", pod: one, err: `invalid port "70000": must be between 1 and 65535`},
	} {
		q, _ := url.ParseQuery(tc.query)
		u, _, err := streamSubresources[tc.sub](tc.pod, q)
		if tc.err != "" {
			if !apierrors.IsBadRequest(err) || err.Error() != tc.err {
				t.Errorf("%s?%s: error %v, want BadRequest %q", tc.sub, tc.query, err, tc.err)
			}
			continue
		}
		if err != nil || u.Path+"?"+u.RawQuery != tc.want {
			t.Errorf("%s?%s: %v %v, want %s", tc.sub, tc.query, u, err, tc.want)
		}
	}
}
