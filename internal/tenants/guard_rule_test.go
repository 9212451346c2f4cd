package tenants_test

import (
	"testing"

	"tidings/internal/tenants"
)

// The guard's rule, case by case: the sample it needs, each threshold
// (strictly above pauses), and complaints judged before bounces.
func TestJudge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                         string
		outcomes, complaints, bounce int
		min                          int
		want                         string
	}{
		{"too few outcomes to judge", 499, 100, 100, 500, ""},
		{"clean", 1000, 0, 0, 500, ""},
		{"complaints at 0.3% exactly", 1000, 3, 0, 500, ""},
		{"complaints above 0.3%", 1000, 4, 0, 500, tenants.PausedComplaintRate},
		{"complaints above 0.3% of a 500 sample", 500, 2, 0, 500, tenants.PausedComplaintRate},
		{"hard bounces at 5% exactly", 1000, 0, 50, 500, ""},
		{"hard bounces above 5%", 1000, 0, 51, 500, tenants.PausedBounceRate},
		{"both: complaints first", 1000, 10, 100, 500, tenants.PausedComplaintRate},
		{"a sample of 1", 1, 1, 0, 1, tenants.PausedComplaintRate},
		{"no outcomes", 0, 0, 0, 0, ""},
	} {
		if got := tenants.Judge(tc.outcomes, tc.complaints, tc.bounce, tc.min); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
