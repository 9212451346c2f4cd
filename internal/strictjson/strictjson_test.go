package strictjson

import (
	"strings"
	"testing"

	"tidings/internal/apperr"
)

func TestClosestName(t *testing.T) {
	t.Parallel()
	known := []string{"enabled", "name", "subject", "content", "disableReason", "limit", "cursor"}
	for _, tc := range []struct{ in, want string }{
		{"enabeld", "enabled"}, {"Name", "name"}, {"subjct", "subject"}, {"limti", "limit"},
		{"cursr", "cursor"}, {"disablereason", "disableReason"}, {"zz", ""}, {"data", ""}, {"x", ""},
	} {
		if got := Closest(tc.in, known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	type doc struct {
		Name  Opt[string] `json:"name"`
		Count Opt[int]    `json:"count"`
	}
	tests := []struct {
		desc, in    string
		field, want string // "" field: no error
	}{
		{desc: "valid", in: `{"name": "a", "count": 2}`},
		{desc: "unknown field near a known one", in: `{"nmae": "a"}`, field: "nmae", want: "did you mean name?"},
		{desc: "wrong type", in: `{"count": "2"}`, field: "count", want: "must be a number"},
		{desc: "malformed", in: "{\"name\": }", field: "body", want: "(line 1, column 10)"},
		{desc: "two objects", in: `{} {}`, field: "body", want: "a single JSON object"},
		{desc: "not storable", in: `{"name": "a\u0000"}`, field: "name", want: "NUL"},
		{desc: "not an object", in: `[1]`, field: "body", want: "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var d doc
			err := Decode([]byte(tt.in), &d)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			e, ok := apperr.As(err)
			if !ok || e.Code != "VALIDATION_ERROR" {
				t.Fatalf("Decode = %v, want VALIDATION_ERROR", err)
			}
			msgs, _ := e.Details["fields"].(map[string]any)[tt.field].([]string)
			if len(msgs) == 0 || !strings.Contains(msgs[0], tt.want) {
				t.Fatalf("fields %v, want %s: %q", e.Details["fields"], tt.field, tt.want)
			}
		})
	}
}
