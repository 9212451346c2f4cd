package contacts

import (
	"encoding/json"
	"strings"
	"testing"

	"tidings/internal/apperr"
)

func TestParseProperties(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		in        string
		set       int
		remove    []string
		badFields []string
	}{
		{"scalars and arrays", `{"s":"x","n":1.5,"b":true,"a":["x",2,false]}`, 4, nil, nil},
		{"null removes", `{"gone":null,"kept":1}`, 1, []string{"gone"}, nil},
		{"nested object", `{"o":{"a":1}}`, 0, nil, []string{"properties.o"}},
		{"array with object", `{"a":[{"x":1}]}`, 0, nil, []string{"properties.a"}},
		{"array with null", `{"a":[null]}`, 0, nil, []string{"properties.a"}},
		{"nested array", `{"a":[[1]]}`, 0, nil, []string{"properties.a"}},
		{"empty key", `{"":1}`, 0, nil, []string{"properties."}},
		{"number too large", `{"n":1e131072}`, 0, nil, []string{"properties.n"}},
		{"number written out too long", `{"n":1e99999}`, 0, nil, []string{"properties.n"}},
		{"number too fine", `{"n":1e-16384}`, 0, nil, []string{"properties.n"}},
		{"number in array", `{"a":[1,1e21]}`, 0, nil, []string{"properties.a"}},
		{"numbers at the limits", `{"a":99999999999999999999,"b":1e-20,"c":-1.5e19}`, 3, nil, nil},
		{"string at the limit", `{"s":"` + strings.Repeat("x", 4096) + `"}`, 1, nil, nil},
		{"string too long", `{"s":"` + strings.Repeat("x", 4097) + `"}`, 0, nil, []string{"properties.s"}},
		{"array too long", `{"a":[` + strings.Repeat("1,", 100) + `1]}`, 0, nil, []string{"properties.a"}},
		{"string too long in array", `{"a":["` + strings.Repeat("x", 4097) + `"]}`, 0, nil, []string{"properties.a"}},
	}
	for _, tt := range tests {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tt.in), &raw); err != nil {
			t.Fatal(err)
		}
		p, err := ParseProperties(raw)
		if len(tt.badFields) > 0 {
			e, ok := apperr.As(err)
			if !ok {
				t.Errorf("%s: want error", tt.desc)
				continue
			}
			fields := e.Details["fields"].(map[string]any)
			for _, f := range tt.badFields {
				if _, ok := fields[f]; !ok {
					t.Errorf("%s: no field %q in %v", tt.desc, f, fields)
				}
			}
			continue
		}
		if err != nil || len(p.Set) != tt.set || len(p.Remove) != len(tt.remove) {
			t.Errorf("%s: %+v %v", tt.desc, p, err)
		}
	}
}

func TestPatchJSONNeverNull(t *testing.T) {
	t.Parallel()
	var p Patch
	if string(p.SetJSON()) != "{}" || p.RemoveKeys() == nil {
		t.Fatal("empty patch must be {} and an empty array")
	}
}
