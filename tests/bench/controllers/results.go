package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// results holds every run's value of every figure.
type results struct {
	// values: phase → figure → side → one value per round.
	values  map[string]map[string]map[string][]float64
	formats map[string]func(float64) string
}

func newResults() *results {
	return &results{values: map[string]map[string]map[string][]float64{}, formats: map[string]func(float64) string{}}
}

func (r *results) add(phase string, f figure, side string) {
	if r.values[phase] == nil {
		r.values[phase] = map[string]map[string][]float64{}
	}
	if r.values[phase][f.name] == nil {
		r.values[phase][f.name] = map[string][]float64{}
	}
	r.values[phase][f.name][side] = append(r.values[phase][f.name][side], f.value)
	r.formats[f.name] = f.format
}

// print writes a table per phase: each side's range over the rounds, and each
// kube-controller-manager side's mean over wasmplane's (above 1: wasmplane is faster).
func (r *results) print(w io.Writer, sides []side) {
	for _, phase := range phaseNames() {
		figs := r.values[phase]
		if figs == nil {
			continue
		}
		fmt.Fprintf(w, "\n== %s ==\n", phase)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		head := []string{"figure"}
		for _, s := range sides {
			head = append(head, s.name)
		}
		for _, s := range sides {
			if s.name != sideWasmplane {
				head = append(head, s.name+" ÷ wasmplane")
			}
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		names := make([]string, 0, len(figs))
		for name := range figs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			row := []string{name}
			format := r.formats[name]
			for _, s := range sides {
				row = append(row, span(figs[name][s.name], format))
			}
			base := mean(figs[name][sideWasmplane])
			for _, s := range sides {
				if s.name == sideWasmplane {
					continue
				}
				if v := mean(figs[name][s.name]); base > 0 && v > 0 {
					row = append(row, fmt.Sprintf("%.1f×", v/base))
				} else {
					row = append(row, "–")
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		_ = tw.Flush()
	}
}

// span is "min–max (n runs)", or the value alone for one run.
func span(v []float64, format func(float64) string) string {
	switch len(v) {
	case 0:
		return "–"
	case 1:
		return format(v[0])
	}
	return fmt.Sprintf("%s–%s (%d runs)", format(slices.Min(v)), format(slices.Max(v)), len(v))
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
