package definition

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseDefinition: Parse never panics, and what it accepts is
// consistent: step ids unique and found where they are, Next walks the steps
// in order, and the JSON form parses back to the same definition (so its
// step ids round-trip). Seeds: the YAML files under testdata.
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
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := Parse(src, Options{})
		if err != nil {
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
		again, err := Parse(b, Options{})
		if err != nil {
			t.Fatalf("JSON form does not parse: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(d, again) {
			t.Fatalf("JSON form parses to another definition\n%s", b)
		}
	})
}
