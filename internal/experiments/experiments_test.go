package experiments

import (
	"fmt"
	"math"
	"testing"
)

func TestAssignBalance(t *testing.T) {
	t.Parallel()
	const n = 100_000
	for _, tc := range []struct {
		desc     string
		seed     string
		fraction float64
		variants int
	}{
		{desc: "20% in 2", seed: "brd_a", fraction: 0.2, variants: 2},
		{desc: "5% in 5", seed: "brd_b", fraction: 0.05, variants: 5},
		{desc: "50% in 3", seed: "brd_c", fraction: 0.5, variants: 3},
		{desc: "30% in 4", seed: "brd_d", fraction: 0.3, variants: 4},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			counts := make([]int, tc.variants)
			rest := 0
			for i := range n {
				v := Assign(tc.seed, fmt.Sprintf("cnt_%07d", i), tc.fraction, tc.variants)
				if v < 0 {
					rest++
					continue
				}
				counts[v]++
			}
			want := tc.fraction / float64(tc.variants)
			for v, c := range counts {
				if got := float64(c) / n; math.Abs(got-want) > 0.02*want+0.002 {
					t.Errorf("variant %d: share %.4f, want %.4f ± 2%%", v, got, want)
				}
			}
			if got := float64(rest) / n; math.Abs(got-(1-tc.fraction)) > 0.02*(1-tc.fraction) {
				t.Errorf("rest: share %.4f, want %.4f ± 2%%", got, 1-tc.fraction)
			}
		})
	}
}

func TestAssignStable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, seed, id string
		fraction       float64
		variants       int
		want           int
	}{
		// Pinned answers: a change of the hash would move every running
		// experiment's contacts.
		{desc: "rest", seed: "brd_1", id: "cnt_1", fraction: 0.2, variants: 2, want: -1},
		{desc: "tested, second variant", seed: "brd_1", id: "cnt_5", fraction: 0.2, variants: 2, want: 1},
		{desc: "everyone tested, third of three", seed: "brd_1", id: "cnt_1", fraction: 1, variants: 3, want: 2},
		{desc: "everyone tested, first of three", seed: "brd_1", id: "cnt_5", fraction: 1, variants: 3, want: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			for range 3 {
				if got := Assign(tc.seed, tc.id, tc.fraction, tc.variants); got != tc.want {
					t.Fatalf("Assign = %d, then %d", tc.want, got)
				}
			}
		})
	}
	// The bucket is pinned: SHA-256("brd_x:cnt_y")'s first six bytes.
	if got, want := Bucket("brd_x", "cnt_y"), uint64(0x3ff9209f0a7a); got != want {
		t.Errorf("Bucket = %x, want %x", got, want)
	}
	// A larger test fraction keeps everyone the smaller one tested in the
	// test group (the lowest buckets), and a contact's variant does not
	// depend on the other contacts.
	moved := 0
	for i := range 10_000 {
		id := fmt.Sprintf("cnt_%d", i)
		if Assign("brd_s", id, 0.1, 2) >= 0 && Assign("brd_s", id, 0.2, 2) < 0 {
			moved++
		}
	}
	if moved != 0 {
		t.Errorf("%d contacts of the 10%% test group are not in the 20%% one", moved)
	}
	// Different broadcasts draw independently: about half of one's
	// variant-0 contacts are variant 0 in the other.
	same, in := 0, 0
	for i := range 100_000 {
		id := fmt.Sprintf("cnt_%d", i)
		if Assign("brd_p", id, 1, 2) == 0 {
			in++
			if Assign("brd_q", id, 1, 2) == 0 {
				same++
			}
		}
	}
	if r := float64(same) / float64(in); math.Abs(r-0.5) > 0.02 {
		t.Errorf("variant 0 in both broadcasts: %.3f of those in one, want about 0.5", r)
	}
}

func TestSplitBalance(t *testing.T) {
	t.Parallel()
	const n = 100_000
	for _, tc := range []struct {
		desc     string
		branches []Branch
	}{
		{desc: "50/50", branches: []Branch{{"a", 50}, {"b", 50}}},
		{desc: "10/30/60", branches: []Branch{{"a", 10}, {"b", 30}, {"c", 60}}},
		{desc: "five", branches: []Branch{{"a", 20}, {"b", 20}, {"c", 20}, {"d", 20}, {"e", 20}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			counts := map[string]int{}
			for i := range n {
				counts[Split("seq_1", fmt.Sprintf("cnt_%d", i), tc.branches)]++
			}
			for _, b := range tc.branches {
				want := float64(b.Weight) / 100
				if got := float64(counts[b.Name]) / n; math.Abs(got-want) > 0.02*want+0.002 {
					t.Errorf("branch %s: share %.4f, want %.2f ± 2%%", b.Name, got, want)
				}
			}
			if got := Split("seq_1", "cnt_42", tc.branches); got != Split("seq_1", "cnt_42", tc.branches) {
				t.Error("Split is not stable")
			}
		})
	}
}

func TestHoldoutShare(t *testing.T) {
	t.Parallel()
	for _, pct := range []int{0, 10, 50} {
		in := 0
		for i := range 100_000 {
			if InHoldout("seq_h", fmt.Sprintf("cnt_%d", i), pct) {
				in++
			}
		}
		want := float64(pct) / 100
		if got := float64(in) / 100_000; math.Abs(got-want) > 0.02*want+0.002 {
			t.Errorf("holdout %d%%: share %.4f", pct, got)
		}
	}
}

func TestWinner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		metric   string
		variants []Counts
		want     int
	}{
		{desc: "higher open rate", metric: MetricOpened,
			variants: []Counts{{Delivered: 100, Opened: 10}, {Delivered: 100, Opened: 20}}, want: 1},
		{desc: "rate, not count", metric: MetricOpened,
			variants: []Counts{{Delivered: 1000, Opened: 100}, {Delivered: 100, Opened: 20}}, want: 1},
		{desc: "tie goes to the earlier", metric: MetricOpened,
			variants: []Counts{{Delivered: 100, Opened: 20}, {Delivered: 50, Opened: 10}}, want: 0},
		{desc: "tie of three, the middle first of the best", metric: MetricClicked,
			variants: []Counts{{Delivered: 10, Clicked: 1}, {Delivered: 10, Clicked: 3}, {Delivered: 20, Clicked: 6}}, want: 1},
		{desc: "no deliveries anywhere: the first", metric: MetricOpened,
			variants: []Counts{{}, {}, {}}, want: 0},
		{desc: "no deliveries against a zero rate: tie, the first", metric: MetricOpened,
			variants: []Counts{{}, {Delivered: 10}}, want: 0},
		{desc: "no deliveries loses to any success", metric: MetricOpened,
			variants: []Counts{{}, {Delivered: 10, Opened: 1}}, want: 1},
		{desc: "machine opens excluded", metric: MetricOpened,
			variants: []Counts{{Delivered: 100, Opened: 10, MachineOpened: 90}, {Delivered: 100, Opened: 11}}, want: 1},
		{desc: "machine clicks excluded", metric: MetricClicked,
			variants: []Counts{{Delivered: 100, Clicked: 5}, {Delivered: 100, Clicked: 4, MachineClicked: 50}}, want: 0},
		{desc: "clicked judges clicks, not opens", metric: MetricClicked,
			variants: []Counts{{Delivered: 100, Opened: 90, Clicked: 1}, {Delivered: 100, Opened: 10, Clicked: 2}}, want: 1},
		{desc: "opens beyond deliveries count as delivered", metric: MetricOpened,
			variants: []Counts{{Delivered: 10, Opened: 30}, {Delivered: 10, Opened: 10}}, want: 0},
		{desc: "none", metric: MetricOpened, variants: nil, want: -1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := Winner(tc.variants, tc.metric); got != tc.want {
				t.Errorf("Winner = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWilson(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc           string
		s, n           int64
		wantLo, wantHi float64
	}{
		// Reference values: Wilson score interval, z = 1.96, no
		// continuity correction (e.g. statsmodels proportion_confint
		// method="wilson").
		{desc: "10 of 100", s: 10, n: 100, wantLo: 0.05522, wantHi: 0.17437},
		{desc: "0 of 10", s: 0, n: 10, wantLo: 0, wantHi: 0.27753},
		{desc: "10 of 10", s: 10, n: 10, wantLo: 0.72247, wantHi: 1},
		{desc: "50 of 100", s: 50, n: 100, wantLo: 0.40383, wantHi: 0.59617},
		{desc: "1 of 2", s: 1, n: 2, wantLo: 0.09453, wantHi: 0.90547},
		{desc: "nothing", s: 0, n: 0, wantLo: 0, wantHi: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			lo, hi := Wilson(tc.s, tc.n)
			if math.Abs(lo-tc.wantLo) > 1e-4 || math.Abs(hi-tc.wantHi) > 1e-4 {
				t.Errorf("Wilson(%d, %d) = [%.5f, %.5f], want [%.5f, %.5f]", tc.s, tc.n, lo, hi, tc.wantLo, tc.wantHi)
			}
		})
	}
}
