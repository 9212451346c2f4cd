package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"tidings/internal/sequences/definition"
)

func mustDef(t *testing.T, src string) *definition.Definition {
	t.Helper()
	d, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const splitYAML = `trigger: {event: e}
steps:
  - send: intro
  - split: {a: 50, b: 50}
  - {delay: 1d, branch: a}
  - {send: offer-a, branch: a}
  - {delay: 3d, branch: b}
  - {send: offer-b, branch: b}
  - delay: 2d
  - send: last
  - delay: 9d
`

// TestPlanBranches: an enrolment walks its branch's steps and passes the
// others' at once; the holdout finds no step.
func TestPlanBranches(t *testing.T) {
	t.Parallel()
	def := mustDef(t, splitYAML)
	for _, tc := range []struct {
		desc, after, branch, want string
		delay                     time.Duration
		ok                        bool
	}{
		{"first step, a", "", "a", "step-1", 0, true},
		{"past the split, a", "step-1", "a", "step-4", 24 * time.Hour, true},
		{"past the split, b", "step-1", "b", "step-6", 72 * time.Hour, true},
		{"after a's offer", "step-4", "a", "step-8", 48 * time.Hour, true},
		{"after b's offer", "step-6", "b", "step-8", 48 * time.Hour, true},
		{"default branch passes both", "step-1", definition.BranchDefault, "step-8", 48 * time.Hour, true},
		{"holdout", "", definition.BranchHoldout, "", 0, false},
	} {
		s, d, ok := plan(def, tc.after, tc.branch)
		if s.ID != tc.want || d != tc.delay || ok != tc.ok {
			t.Errorf("%s: got %s %v %v, want %s %v %v", tc.desc, s.ID, d, ok, tc.want, tc.delay, tc.ok)
		}
	}
}

// TestHoldoutSpan: the holdout completes when the slowest branch reaches
// its last email step; trailing delays do not count.
func TestHoldoutSpan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, src string
		want      time.Duration
	}{
		{"split: b is slower", splitYAML, 5 * 24 * time.Hour},
		{"no split", "trigger: {event: e}\nsteps: [{send: a}, {delay: 2h}, {send: b}, {delay: 1d}]\n", 2 * time.Hour},
		{"a lone send", "trigger: {event: e}\nsteps: [{send: a}]\n", 0},
		{"no email step", "trigger: {event: e}\nsteps: [{delay: 1d}]\n", 0},
	} {
		if got := holdoutSpan(mustDef(t, tc.src)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// TestBranchOfBalance: over 100,000 contacts the holdout share and the
// split's weights among the rest are within 2% of what the YAML asks,
// the draw is stable, and it does not depend on the order the YAML lists
// the branches in.
func TestBranchOfBalance(t *testing.T) {
	t.Parallel()
	const n = 100_000
	for _, tc := range []struct {
		desc, split string
		holdout     int
		weights     map[string]float64
	}{
		{"50/50, no holdout", "{a: 50, b: 50}", 0, map[string]float64{"a": 0.5, "b": 0.5}},
		{"70/30, holdout 10", "{b: 30, a: 70}", 10, map[string]float64{"a": 0.7, "b": 0.3}},
		{"three, holdout 50", "{x: 20, y: 30, z: 50}", 50, map[string]float64{"x": 0.2, "y": 0.3, "z": 0.5}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf("trigger: {event: e}\nholdout: %d\nsteps: [{split: %s}, {send: t}]\n", tc.holdout, tc.split)
			seq := Sequence{ID: "trial", Def: mustDef(t, src)}
			counts := map[string]int{}
			for i := range n {
				counts[BranchOf(seq, fmt.Sprintf("cnt_%06d", i))]++
			}
			held := float64(counts[definition.BranchHoldout]) / n
			if want := float64(tc.holdout) / 100; math.Abs(held-want) > 0.02*want+0.002 {
				t.Errorf("holdout share %.4f, want %.2f ± 2%%", held, want)
			}
			treated := n - counts[definition.BranchHoldout]
			for b, want := range tc.weights {
				if got := float64(counts[b]) / float64(treated); math.Abs(got-want) > 0.02*want+0.002 {
					t.Errorf("branch %s: %.4f of the treated, want %.2f ± 2%%", b, got, want)
				}
			}
			if len(counts) != len(tc.weights)+min(tc.holdout, 1) {
				t.Errorf("branches drawn: %v", counts)
			}
		})
	}
	// Stable, and the same whichever order the branches are listed in.
	one := Sequence{ID: "s1", Def: mustDef(t, "trigger: {event: e}\nholdout: 20\nsteps: [{split: {a: 40, b: 60}}, {send: t}]\n")}
	two := Sequence{ID: "s1", Def: mustDef(t, "trigger: {event: e}\nholdout: 20\nsteps: [{split: {b: 60, a: 40}}, {send: t}]\n")}
	for i := range 1000 {
		id := fmt.Sprintf("cnt_%d", i)
		if b := BranchOf(one, id); b != BranchOf(one, id) || b != BranchOf(two, id) {
			t.Fatalf("%s: %s, then %s, reordered %s", id, b, BranchOf(one, id), BranchOf(two, id))
		}
	}
	if b := BranchOf(Sequence{ID: "s", Def: mustDef(t, "trigger: {event: e}\nsteps: [{send: t}]\n")}, "cnt_1"); b != definition.BranchDefault {
		t.Errorf("no split: %s", b)
	}
}
