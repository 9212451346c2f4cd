package experiments

import "math"

// Metrics a broadcast experiment is judged by: a person's open or click
// (machine ones never count, ADDENDUM 17).
const (
	MetricOpened  = "opened"
	MetricClicked = "clicked"
)

// Counts are one variant's outcomes. Opened and Clicked are people's
// (first open, first click of each message); MachineOpened and
// MachineClicked are scanners' and prefetchers', shown apart and never
// judged.
type Counts struct {
	Delivered, Opened, Clicked    int64
	MachineOpened, MachineClicked int64
}

// Successes is the metric's count of people, never above delivered (an
// open whose delivery was not reported yet would otherwise give a rate
// above 1).
func (c Counts) Successes(metric string) int64 {
	n := c.Opened
	if metric == MetricClicked {
		n = c.Clicked
	}
	return min(n, c.Delivered)
}

// Rate is Successes / Delivered, 0 with nothing delivered.
func (c Counts) Rate(metric string) float64 {
	if c.Delivered == 0 {
		return 0
	}
	return float64(c.Successes(metric)) / float64(c.Delivered)
}

// Winner is the index of the variant with the highest rate of the metric;
// ties (including every variant with nothing delivered) go to the earlier
// variant. -1 for no variants.
func Winner(variants []Counts, metric string) int {
	best := -1
	for i, v := range variants {
		// Compared as fractions (a·d' > a'·d), so equal rates are equal
		// however they were reached.
		if best < 0 || better(v, variants[best], metric) {
			best = i
		}
	}
	return best
}

func better(a, b Counts, metric string) bool {
	if a.Delivered == 0 {
		return false
	}
	if b.Delivered == 0 {
		return a.Successes(metric) > 0
	}
	return a.Successes(metric)*b.Delivered > b.Successes(metric)*a.Delivered
}

// z95 is the standard normal quantile of 0.975.
const z95 = 1.959963984540054

// Wilson is the 95% Wilson score interval of a proportion of successes
// out of n, without continuity correction: [0, 0] for n = 0.
func Wilson(successes, n int64) (lo, hi float64) {
	if n <= 0 {
		return 0, 0
	}
	s := min(max(successes, 0), n)
	p := float64(s) / float64(n)
	nf := float64(n)
	z2 := z95 * z95
	centre := p + z2/(2*nf)
	margin := z95 * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	den := 1 + z2/nf
	lo, hi = (centre-margin)/den, (centre+margin)/den
	// At p = 0 or 1 the bound on that side is exactly 0 or 1; computed, it
	// is off by a rounding error (0.9999999999999998).
	if s == 0 {
		lo = 0
	}
	if s == n {
		hi = 1
	}
	return max(0, lo), min(1, hi)
}
