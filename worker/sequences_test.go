package worker

import (
	"slices"
	"testing"

	"tidings/internal/sequences/engine"
	"tidings/internal/telemetry"
)

// The metric of scheduled-send runs is labelled by the engine's outcomes,
// all of them, created at start: one list, checked here where both are in
// reach.
func TestRunOutcomesAreTheEngines(t *testing.T) {
	t.Parallel()
	var want []string
	for _, o := range engine.Outcomes {
		want = append(want, string(o))
	}
	if got := telemetry.RunOutcomes(); !slices.Equal(got, want) {
		t.Fatalf("telemetry's outcomes %v, the engine's %v", got, want)
	}
}
