package openapi

import "testing"

// BenchmarkNew measures building every document for the ~15 resources wasmplane serves;
// it runs at server start, so it has to stay well under the 3 s readiness budget.
func BenchmarkNew(b *testing.B) {
	s, res := testScheme(b), testResources()
	b.ReportAllocs()
	var svc *Service
	for b.Loop() {
		var err error
		if svc, err = New(s, res, "v1.37.2"); err != nil {
			b.Fatal(err)
		}
	}
	v3 := 0
	for _, d := range svc.base {
		v3 += len(d.json.data)
	}
	b.ReportMetric(float64(len(svc.v2JSON.data)), "v2-bytes")
	b.ReportMetric(float64(v3), "v3-bytes")
}

// BenchmarkV2Protobuf measures the gnostic conversion the first protobuf request pays.
func BenchmarkV2Protobuf(b *testing.B) {
	svc, err := New(testScheme(b), testResources(), "v1.37.2")
	if err != nil {
		b.Fatal(err)
	}
	var size int
	for b.Loop() {
		l := &lazyProto{json: svc.v2Proto.json, convert: svc.v2Proto.convert}
		rep, err := l.get()
		if err != nil {
			b.Fatal(err)
		}
		size = len(rep.data)
	}
	b.ReportMetric(float64(size), "proto-bytes")
}
