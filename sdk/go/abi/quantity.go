package abi

import (
	"errors"
	"strconv"
	"strings"
)

var suffixes = []struct {
	s string
	m float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
	{"m", 1e-3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
}

// ParseQuantity parses a Kubernetes quantity ("3800m", "8Gi", "110") and returns its value
// multiplied by scale, rounded up (scale 1000 gives millicores for cpu, 1 gives bytes).
// It handles the suffixes Kubernetes prints; it is not a full resource.Quantity parser.
func ParseQuantity(q string, scale int64) (int64, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return 0, errors.New("empty quantity")
	}
	mult := 1.0
	for _, s := range suffixes {
		if strings.HasSuffix(q, s.s) {
			mult, q = s.m, strings.TrimSuffix(q, s.s)
			break
		}
	}
	if n, err := strconv.ParseInt(q, 10, 64); err == nil && mult >= 1 {
		return n * int64(mult) * scale, nil
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil {
		return 0, errors.New("bad quantity " + strconv.Quote(q))
	}
	v := f * mult * float64(scale)
	iv := int64(v)
	if float64(iv) < v {
		iv++
	}
	return iv, nil
}
