package rules

import (
	"errors"
	"reflect"
	"strconv"
	"testing"
)

func TestCheckCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		self      string
		graph     map[string][]string // existing segments and their refs, self's proposed refs included
		wantCycle []string
		wantUnkn  []string
	}{
		{desc: "no refs", self: "a", graph: map[string][]string{"a": nil}},
		{desc: "chain", self: "a", graph: map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil}},
		{desc: "diamond is no cycle", self: "a", graph: map[string][]string{"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": nil}},
		{desc: "self-reference", self: "a", graph: map[string][]string{"a": {"a"}}, wantCycle: []string{"a", "a"}},
		{desc: "two", self: "a", graph: map[string][]string{"a": {"b"}, "b": {"a"}}, wantCycle: []string{"a", "b", "a"}},
		{desc: "long", self: "a", graph: map[string][]string{"a": {"x", "b"}, "x": nil, "b": {"c"}, "c": {"d"}, "d": {"a"}},
			wantCycle: []string{"a", "b", "c", "d", "a"}},
		{desc: "cycle below self", self: "a", graph: map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"b"}},
			wantCycle: []string{"b", "c", "b"}},
		{desc: "unknown", self: "a", graph: map[string][]string{"a": {"z", "b", "y"}, "b": nil}, wantUnkn: []string{"y", "z"}},
		{desc: "unknown deeper", self: "a", graph: map[string][]string{"a": {"b"}, "b": {"gone"}}, wantUnkn: []string{"gone"}},
		{desc: "unknown wins over cycle", self: "a", graph: map[string][]string{"a": {"a", "z"}}, wantUnkn: []string{"z"}},
		{desc: "self unknown", self: "new", graph: map[string][]string{}, wantUnkn: []string{"new"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			calls := map[string]int{}
			err := CheckCycles(tc.self, func(id string) ([]string, bool) {
				calls[id]++
				refs, ok := tc.graph[id]
				return refs, ok
			})
			for id, n := range calls {
				if n > 1 {
					t.Errorf("refsOf(%q) called %d times", id, n)
				}
			}
			var cyc *CycleError
			var unk *UnknownSegmentError
			switch {
			case tc.wantCycle != nil:
				if !errors.As(err, &cyc) || !errors.Is(err, ErrCircular) || !reflect.DeepEqual(cyc.Cycle, tc.wantCycle) {
					t.Errorf("got %v, want cycle %q", err, tc.wantCycle)
				}
			case tc.wantUnkn != nil:
				if !errors.As(err, &unk) || !errors.Is(err, ErrUnknownSegment) || !reflect.DeepEqual(unk.IDs, tc.wantUnkn) {
					t.Errorf("got %v, want unknown %q", err, tc.wantUnkn)
				}
			case err != nil:
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}

func TestCheckCyclesLongChain(t *testing.T) {
	t.Parallel()
	// 20,000 segments in a line, closing on the first: no recursion depth
	// problem, linear time.
	const n = 20_000
	err := CheckCycles("s0", func(id string) ([]string, bool) {
		i, _ := strconv.Atoi(id[1:])
		return []string{"s" + strconv.Itoa((i+1)%n)}, true
	})
	var cyc *CycleError
	if !errors.As(err, &cyc) || len(cyc.Cycle) != n+1 || cyc.Error()[:30] != "circular segment dependency: s" {
		t.Fatalf("got %T %d", err, len(cyc.Cycle))
	}
}
