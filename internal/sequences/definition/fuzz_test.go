package definition

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"tidings/internal/apperr"
)

// FuzzParseDefinition: Parse never panics; what it refuses is one
// VALIDATION_ERROR of the package's shape (checkRefusal); what it accepts
// is consistent: step ids unique and found where they are, Next walks the
// steps in order, and the JSON form parses back to the same definition (so
// its step ids round-trip). Seeds: the YAML files under testdata and the
// hostile documents of TestParseHostile, cut to size.
//
//	go test -run '^$' -fuzz FuzzParseDefinition -fuzztime 5m ./internal/sequences/definition/
func FuzzParseDefinition(f *testing.F) {
	for _, dir := range []string{"testdata/valid", "testdata/invalid"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, h := range hostileDocs(512) {
		f.Add([]byte(h.src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := Parse(src, Options{})
		if err != nil {
			checkRefusal(t, src, err)
			return
		}
		if len(d.Steps) == 0 || len(d.Steps) > MaxSteps || d.Trigger.Event == "" {
			t.Fatalf("accepted %d steps, trigger %q", len(d.Steps), d.Trigger.Event)
		}
		prev := ""
		for i, s := range d.Steps {
			if got := d.StepIndex(s.ID); got != i {
				t.Fatalf("step %d id %q: StepIndex %d", i, s.ID, got)
			}
			if next, ok := d.Next(prev); !ok || next.ID != s.ID {
				t.Fatalf("Next(%q) = %q, %v; want %q", prev, next.ID, ok, s.ID)
			}
			prev = s.ID
			switch s.Kind {
			case KindEmail:
				if s.Template == "" || s.Delay != 0 {
					t.Fatalf("email step %+v", s)
				}
			case KindDelay:
				if s.Delay <= 0 || s.Delay > MaxDelay || s.Template != "" || s.Conditions != nil {
					t.Fatalf("delay step %+v", s)
				}
			default:
				t.Fatalf("step kind %q", s.Kind)
			}
		}
		if _, ok := d.Next(prev); ok {
			t.Fatalf("Next after the last step")
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		// As Go writes it and as PostgreSQL's jsonb gives it back.
		for _, form := range [][]byte{b, jsonbText(t, b)} {
			again, err := ParseJSON(form)
			if err != nil {
				t.Fatalf("JSON form does not parse: %v\n%q", err, form)
			}
			if !reflect.DeepEqual(d, again) {
				t.Fatalf("JSON form parses to another definition\n%q", form)
			}
		}
	})
}

// jsonbText re-encodes a JSON document the way PostgreSQL prints jsonb:
// inside strings only ", \ and control characters below U+0020 are
// escaped; everything else (C1 controls, U+2028, <) is written raw.
func jsonbText(t *testing.T, doc []byte) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var write func(v any)
	str := func(s string) {
		out = append(out, '"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				out = append(out, '\\', byte(r))
			case r < 0x20:
				out = fmt.Appendf(out, `\u%04x`, r)
			default:
				out = utf8.AppendRune(out, r)
			}
		}
		out = append(out, '"')
	}
	write = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			out = append(out, '{')
			keys := slices.Sorted(maps.Keys(v))
			for i, k := range keys {
				if i > 0 {
					out = append(out, ", "...)
				}
				str(k)
				out = append(out, ": "...)
				write(v[k])
			}
			out = append(out, '}')
		case []any:
			out = append(out, '[')
			for i, e := range v {
				if i > 0 {
					out = append(out, ", "...)
				}
				write(e)
			}
			out = append(out, ']')
		case string:
			str(v)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
	}
	write(v)
	return out
}

// checkRefusal asserts the package's error contract: one VALIDATION_ERROR
// (apperr kind Invalid) with details.fields, each field a non-empty path of
// bounded length with at least one message, every message of a field other
// than content starting with its YAML line, and the whole answer small.
func checkRefusal(t *testing.T, src []byte, err error) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Kind != apperr.KindInvalid || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("refused with %T %v, want a VALIDATION_ERROR", err, err)
	}
	fields, _ := e.Details["fields"].(map[string]any)
	if len(fields) == 0 || len(fields) > apperr.MaxFields {
		t.Fatalf("%d fields in %v", len(fields), e.Details)
	}
	size := 0
	for path, v := range fields {
		msgs, _ := v.([]string)
		if path == "" || len(path) > maxPathLen || len(msgs) == 0 {
			t.Fatalf("field %.80q (%d bytes) with messages %q", path, len(path), msgs)
		}
		size += len(path)
		for _, m := range msgs {
			size += len(m)
			if path != "content" && !strings.HasPrefix(m, "line ") {
				t.Fatalf("%s: message %q does not name its line\n%s", path, m, src)
			}
		}
	}
	if size > 16<<10 {
		t.Fatalf("error of %d bytes", size)
	}
}
