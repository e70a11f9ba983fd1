package openapi

import "testing"

// BenchmarkNew measures building every document for the ~15 resources wasmplane serves;
// it runs at server start, so it has to stay well under the 3 s readiness budget.
func BenchmarkNew(b *testing.B) {
	s, res := testScheme(b), testResources()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(s, res, "v1.37.2"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkV2Protobuf measures the lazy gnostic conversion paid by the first protobuf request.
func BenchmarkV2Protobuf(b *testing.B) {
	svc, err := New(testScheme(b), testResources(), "v1.37.2")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		l := &lazyProto{json: svc.v2Proto.json, convert: svc.v2Proto.convert}
		if _, err := l.get(); err != nil {
			b.Fatal(err)
		}
	}
}
