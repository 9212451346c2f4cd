package definition

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"tidings/internal/events"
)

func TestWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		steps string
		want  []string
	}{
		{desc: "ends with an email", steps: "[{send: a}, {delay: 1d}, {send: b}]", want: nil},
		{desc: "one trailing delay", steps: "[{send: a}, {delay: 1d}]", want: []string{"steps[1]: a delay after the last email step only postpones the sequence's completion"}},
		{desc: "several trailing delays", steps: "[{send: a}, {delay: 1d}, {delay: 2d}]", want: []string{"steps[1]: a delay after the last email step only postpones the sequence's completion"}},
		{desc: "only delays", steps: "[{delay: 1d}, {delay: 2d}]", want: []string{"steps: the sequence has no email step, so it sends nothing"}},
		{desc: "leading delay", steps: "[{delay: 1d}, {send: a}]", want: nil},
	}
	for _, tc := range tests {
		d := mustParse(t, "trigger: {event: e}\nsteps: "+tc.steps+"\n", Options{})
		if !reflect.DeepEqual(d.Warnings, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.desc, d.Warnings, tc.want)
		}
	}
}

func TestNavigation(t *testing.T) {
	t.Parallel()
	d := mustParse(t, string(readTestdata(t, "valid/rules.yaml")), Options{})
	ids := func(steps []Step) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.ID)
		}
		return out
	}
	if got := ids(d.Steps); !reflect.DeepEqual(got, []string{"first", "step-2", "step-3", "step-4"}) {
		t.Fatalf("step ids %q", got)
	}
	tests := []struct {
		desc   string
		after  string
		want   string
		wantOK bool
	}{
		{desc: "first step", after: "", want: "first", wantOK: true},
		{desc: "middle", after: "first", want: "step-2", wantOK: true},
		{desc: "to the last", after: "step-3", want: "step-4", wantOK: true},
		{desc: "after the last", after: "step-4", wantOK: false},
		{desc: "unknown id", after: "gone", wantOK: false},
	}
	for _, tc := range tests {
		got, ok := d.Next(tc.after)
		if ok != tc.wantOK || got.ID != tc.want {
			t.Errorf("%s: Next(%q) = %q, %v; want %q, %v", tc.desc, tc.after, got.ID, ok, tc.want, tc.wantOK)
		}
	}
	for i, s := range d.Steps {
		if got := d.StepIndex(s.ID); got != i {
			t.Errorf("StepIndex(%q) = %d, want %d", s.ID, got, i)
		}
	}
	if got := d.StepIndex("gone"); got != -1 {
		t.Errorf("StepIndex(gone) = %d", got)
	}
	if got := ids(d.EmailSteps()); !reflect.DeepEqual(got, []string{"first", "step-3"}) {
		t.Errorf("EmailSteps %q", got)
	}
	if got := d.TemplateIDs(); !reflect.DeepEqual(got, []string{"winback-1", "winback-2"}) {
		t.Errorf("TemplateIDs %q", got)
	}
	if got := d.SegmentIDs(); !reflect.DeepEqual(got, []string{"seg_vip"}) {
		t.Errorf("SegmentIDs %q", got)
	}
	if got := d.EventNames(); !reflect.DeepEqual(got, []string{"email.clicked"}) {
		t.Errorf("EventNames %q", got)
	}
	if got := d.Exit.Conditions[0].Within; got != 14*24*time.Hour {
		t.Errorf("within %v", got)
	}

	same := mustParse(t, "trigger: {event: e}\nsteps: [{send: a}, {send: b}, {send: a}]\n", Options{})
	if got := same.TemplateIDs(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("TemplateIDs of a repeated template %q", got)
	}
	if got := same.SegmentIDs(); got != nil {
		t.Errorf("SegmentIDs without rules %q", got)
	}
}

// TestJSONRoundTrip: the JSON form, which GET shows as the parsed steps, is
// a definition Parse reads back to the same thing.
func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"valid/onboarding.yaml", "valid/minimal.yaml", "valid/rules.yaml"} {
		d := mustParse(t, string(readTestdata(t, name)), Options{})
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		again := mustParse(t, string(b), Options{})
		if !reflect.DeepEqual(d, again) {
			t.Errorf("%s: round trip changed the definition\n%s", name, b)
		}
	}
	d := mustParse(t, "trigger: {event: e}\nsteps: [{send: a}, {delay: 72h}]\n", Options{})
	b, _ := json.Marshal(d)
	want := `{"trigger":{"event":"e","reenroll":false},"steps":[{"id":"step-1","action":"email","template":"a"},{"id":"step-2","action":"delay","duration":"72h"}]}`
	if string(b) != want {
		t.Errorf("JSON %s\nwant %s", b, want)
	}
}

// TestParseJSONStoredForm: strings holding characters that PostgreSQL's
// jsonb writes raw but YAML refuses (U+0080) or folds (U+2028, U+0085)
// come back from the stored JSON form unchanged.
func TestParseJSONStoredForm(t *testing.T) {
	t.Parallel()
	src := `name: "n\u0085"
trigger: {event: "e\u0080"}
gates: {type: property, field: "f\ufeff", operator: equals, value: "a\u2028b\u2029\x7f"}
steps: [{send: t}]
`
	d := mustParse(t, src, Options{})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	// What jsonb gives back: Go's escapes of U+2028 and U+2029 undone.
	stored := strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(string(b))
	if _, err := Parse([]byte(stored), Options{}); err == nil {
		t.Fatal("Parse reads the raw characters: the test no longer shows the problem")
	}
	again, err := ParseJSON([]byte(stored))
	if err != nil {
		t.Fatalf("ParseJSON: %v\n%q", err, stored)
	}
	if !reflect.DeepEqual(d, again) {
		t.Errorf("changed: %+v\n%+v", d.Gates, again.Gates)
	}
}

// TestAliasBomb: a billion-laughs document fails fast on its first anchor,
// without expanding anything.
func TestAliasBomb(t *testing.T) {
	t.Parallel()
	src := readTestdata(t, "invalid/laughs.yaml")
	start := time.Now()
	_, err := Parse(src, Options{})
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v", took)
	}
	f := fieldsOf(t, err)
	if len(f) != 1 || !strings.Contains(f["content"][0], "line 1: uses the YAML anchor &a") {
		t.Errorf("fields %v", f)
	}
	// An alias to a scalar anchored elsewhere is refused too.
	_, err = Parse([]byte("x: &n e\ntrigger: {event: *n}\nsteps: [{send: t}]\n"), Options{})
	if f := fieldsOf(t, err); !strings.Contains(f["content"][0], "anchor &n") {
		t.Errorf("fields %v", f)
	}
}

func TestContentHash(t *testing.T) {
	t.Parallel()
	base := []byte("trigger: {event: e}\nsteps: [{send: t}]\n")
	tests := []struct {
		desc string
		src  string
		same bool
	}{
		{desc: "same bytes", src: string(base), same: true},
		{desc: "a comment", src: string(base) + "# note\n", same: false},
		{desc: "whitespace", src: "trigger:  {event: e}\nsteps: [{send: t}]\n", same: false},
		{desc: "no final newline", src: strings.TrimSuffix(string(base), "\n"), same: false},
		{desc: "content", src: "trigger: {event: f}\nsteps: [{send: t}]\n", same: false},
	}
	h := ContentHash(base)
	if len(h) != 64 {
		t.Fatalf("hash %q", h)
	}
	for _, tc := range tests {
		if got := ContentHash([]byte(tc.src)) == h; got != tc.same {
			t.Errorf("%s: same hash %v, want %v", tc.desc, got, tc.same)
		}
	}
}

// TestTriggerEventAgreesWithEvents: a trigger accepts exactly the names a
// custom event may have, so every trigger can fire and no event name is
// refused as a trigger.
func TestTriggerEventAgreesWithEvents(t *testing.T) {
	t.Parallel()
	names := []string{"user.signed_up", "Purchase Completed", "x", " padded ", "\t", "email.opened",
		"email", "emails.sent", "Email.sent", strings.Repeat("é", 256), strings.Repeat("é", 257), "日本"}
	for _, name := range names {
		src, _ := json.Marshal(map[string]any{"trigger": map[string]any{"event": name}, "steps": []any{map[string]any{"send": "t"}}})
		_, err := Parse(src, Options{})
		eventErr := events.ValidateName(name)
		if (err == nil) != (eventErr == nil) {
			t.Errorf("%q: trigger error %v, event name error %v", name, err, eventErr)
		}
	}
}
