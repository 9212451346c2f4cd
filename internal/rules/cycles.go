package rules

import (
	"errors"
	"slices"
	"strings"
)

// ErrCircular is matched (errors.Is) by every *CycleError: the API answers it
// with 422 CIRCULAR_DEPENDENCY.
var ErrCircular = errors.New("circular segment dependency")

// ErrUnknownSegment is matched (errors.Is) by every *UnknownSegmentError: the
// API answers it with 400 VALIDATION_ERROR.
var ErrUnknownSegment = errors.New("unknown segment")

// CycleError reports a dependency cycle. Cycle starts and ends with the same
// id: [a a] for a self-reference, [a b c a] for a -> b -> c -> a.
type CycleError struct {
	Cycle []string
}

// Error names the cycle, e.g. "circular segment dependency: a -> b -> a".
func (e *CycleError) Error() string {
	return "circular segment dependency: " + strings.Join(e.Cycle, " -> ")
}

// Is makes errors.Is(err, ErrCircular) true.
func (e *CycleError) Is(target error) bool { return target == ErrCircular }

// UnknownSegmentError lists referenced segments that do not exist, sorted.
type UnknownSegmentError struct {
	IDs []string
}

// Error names the missing segments.
func (e *UnknownSegmentError) Error() string {
	return "unknown segment: " + strings.Join(e.IDs, ", ")
}

// Is makes errors.Is(err, ErrUnknownSegment) true.
func (e *UnknownSegmentError) Is(target error) bool { return target == ErrUnknownSegment }

// CheckCycles checks the dependency graph seen from segment self before its
// new rules are saved. refsOf returns a segment's direct references
// (Node.SegmentRefs) and whether the segment exists; for self it must return
// the refs of the proposed rules, not the stored ones (for a create, self is
// the id about to be assigned).
//
// It returns an *UnknownSegmentError naming every missing segment reachable
// from self, else a *CycleError for the first cycle found (self-reference, or
// a cycle of any length, including one among other segments that self merely
// reaches, which stored data should never contain), else nil. Every segment is
// visited once, so the cost is linear in the size of the reachable graph.
func CheckCycles(self string, refsOf func(id string) ([]string, bool)) error {
	const (
		unvisited = iota
		onStack
		done
	)
	state := map[string]int{}
	refs := map[string][]string{}
	unknown := map[string]bool{}

	// Fetch the reachable graph first so that missing segments are reported
	// (as a validation problem) even when a cycle also exists.
	queue := []string{self}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if _, seen := refs[id]; seen || unknown[id] {
			continue
		}
		r, ok := refsOf(id)
		if !ok {
			unknown[id] = true
			continue
		}
		if r == nil {
			r = []string{}
		}
		refs[id] = r
		queue = append(queue, r...)
	}
	if len(unknown) > 0 {
		ids := make([]string, 0, len(unknown))
		for id := range unknown {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return &UnknownSegmentError{IDs: ids}
	}

	// Iterative depth-first search: a reference to a segment still on the
	// stack closes a cycle. Iterative so that a long chain cannot exhaust the
	// goroutine stack.
	type frame struct {
		id   string
		next int
	}
	stack := []frame{{id: self}}
	state[self] = onStack
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next == len(refs[top.id]) {
			state[top.id] = done
			stack = stack[:len(stack)-1]
			continue
		}
		ref := refs[top.id][top.next]
		top.next++
		switch state[ref] {
		case onStack:
			var cycle []string
			for i, f := range stack {
				if f.id == ref {
					for _, g := range stack[i:] {
						cycle = append(cycle, g.id)
					}
					break
				}
			}
			return &CycleError{Cycle: append(cycle, ref)}
		case unvisited:
			state[ref] = onStack
			stack = append(stack, frame{id: ref})
		}
	}
	return nil
}
