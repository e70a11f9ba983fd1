package job

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// parseIndexes reads a completedIndexes string ("1,3-5,7") into a sorted set of the
// indexes below completions; malformed or out-of-range parts are dropped, as Kubernetes
// does when completions shrink.
func parseIndexes(s string, completions int) map[int]bool {
	out := map[int]bool{}
	if s == "" {
		return out
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := first; i <= last && i < completions; i++ {
			if i >= 0 {
				out[i] = true
			}
		}
	}
	return out
}

// formatIndexes writes a set of indexes as Kubernetes' interval list: ascending, each
// run of three or more consecutive indexes as "a-b", shorter runs index by index.
func formatIndexes(set map[int]bool) string {
	idx := make([]int, 0, len(set))
	for i := range set {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		switch {
		case j == i+1:
			// Kubernetes writes a run of two as a list, not a range.
			fmt.Fprintf(&b, "%d,%d", idx[i], idx[j])
		case j > i:
			fmt.Fprintf(&b, "%d-%d", idx[i], idx[j])
		default:
			b.WriteString(strconv.Itoa(idx[i]))
		}
		i = j + 1
	}
	return b.String()
}
