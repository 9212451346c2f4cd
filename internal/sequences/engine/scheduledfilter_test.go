package engine

import (
	"maps"
	"slices"
	"testing"

	"tidings/internal/apperr"
)

func TestScheduledFilterCheck(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	tests := []struct {
		desc   string
		filter ScheduledFilter
		fields []string // nil: accepted
	}{
		{desc: "status", filter: ScheduledFilter{Status: s("pending")}},
		{desc: "contact", filter: ScheduledFilter{ContactID: s("cnt_1")}},
		{desc: "status, contact and reason", filter: ScheduledFilter{Status: s("cancelled"), ContactID: s("cnt_1"), CancelReason: s("step_removed")}},
		{desc: "every status", filter: ScheduledFilter{Status: s("dead")}},
		{desc: "every reason of the engine", filter: ScheduledFilter{Status: s("cancelled"), CancelReason: s(ReasonGateBlocked)}},
		{desc: "a reason of contacts", filter: ScheduledFilter{Status: s("cancelled"), CancelReason: s("contact_deleted")}},
		{desc: "neither status nor contact", filter: ScheduledFilter{}, fields: []string{"status"}},
		{desc: "a reason alone", filter: ScheduledFilter{CancelReason: s("manual")}, fields: []string{"status"}},
		{desc: "unknown status", filter: ScheduledFilter{Status: s("queued")}, fields: []string{"status"}},
		{desc: "unknown reason", filter: ScheduledFilter{ContactID: s("cnt_1"), CancelReason: s("bored")}, fields: []string{"cancelReason"}},
		{desc: "send_failed is an exit, not a cancel reason", filter: ScheduledFilter{Status: s("cancelled"), CancelReason: s(ReasonSendFailed)},
			fields: []string{"cancelReason"}},
		{desc: "both wrong", filter: ScheduledFilter{Status: s("x"), CancelReason: s("y")}, fields: []string{"cancelReason", "status"}},
	}
	for _, tt := range tests {
		err := tt.filter.Check()
		if tt.fields == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.desc, err)
			}
			continue
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != "VALIDATION_ERROR" {
			t.Errorf("%s: got %v, want VALIDATION_ERROR", tt.desc, err)
			continue
		}
		fields, _ := e.Details["fields"].(map[string]any)
		if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, tt.fields) {
			t.Errorf("%s: fields %v, want %v", tt.desc, got, tt.fields)
		}
	}
}
