package definition

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// hostileDoc is a document built to cost a parser time or memory, and the
// field its refusal names.
type hostileDoc struct {
	desc, src, field string
}

// hostileDocs builds the hostile documents at about size bytes each
// (MaxSourceBytes for the test, a few KiB as fuzz seeds).
func hostileDocs(size int) []hostileDoc {
	const ok = "trigger: {event: e}\nsteps: [{send: t}]\n"
	fill := func(unit string) string { return strings.Repeat(unit, max(1, (size-200)/len(unit))) }
	half := max(1, (size-100)/2)
	var block, keys strings.Builder
	for i := 0; block.Len() < size-1000; i++ {
		block.WriteString(strings.Repeat(" ", i+1) + "- \n")
	}
	for i := 0; keys.Len() < size-200; i++ {
		fmt.Fprintf(&keys, "k%07d: 1\n", i)
	}
	return []hostileDoc{
		{"billion laughs", "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n" + ok, "content"},
		{"aliases to nothing", ok + "x: " + fill("*a "), "content"},
		{"an anchor per key", ok + fill("? &a a\n: b\n"), "content"},
		{"merge keys", "trigger: {event: e}\nsteps:\n" + fill("  - {<<: {send: t}}\n"), "content"},
		{"flow nesting", ok + "gates: " + strings.Repeat("[", half) + strings.Repeat("]", half) + "\n", "content"},
		{"unclosed flow nesting", ok + "gates: " + strings.Repeat("{a: ", half/2), "content"},
		{"block nesting", ok + "gates:\n" + block.String(), "content"},
		{"documents", fill("---\n"), "content"},
		{"unknown keys", ok + keys.String(), "content"},
		{"one long unknown key", ok + "? " + strings.Repeat("k", size-100) + "\n: 1\n", "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk..."},
		{"one long unknown rule key", ok + "gates:\n  type: event\n  name: x\n  operator: occurred\n  ? " + strings.Repeat("w", size-200) + "\n  : 1\n", "gates.wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww..."},
		{"steps", "trigger: {event: e}\nsteps:\n" + fill("- send: a\n"), "steps"},
		{"rule leaves", ok + "gates:\n  operator: and\n  conditions:\n" + fill("  - {type: property, field: f, operator: exists}\n"), "gates.conditions[500]"},
		{"huge delay", "trigger: {event: e}\nsteps: [{delay: " + strings.Repeat("9", size-100) + "w}]\n", "steps[0].delay"},
		{"delay past MaxDelay", "trigger: {event: e}\nsteps: [{delay: 9223372036s}]\n", "steps[0].delay"},
		{"huge within", ok + "exit: {type: event, name: x, operator: occurred, within: " + strings.Repeat("9", size-200) + "d}\n", "exit.within"},
		{"long event", "trigger: {event: " + strings.Repeat("e", size-100) + "}\nsteps: [{send: t}]\n", "trigger.event"},
		{"escapes", "trigger: {event: \"" + fill(`\u00e9`) + "\"}\nsteps: [{send: t}]\n", "trigger.event"},
		{"huge number", ok + "gates: {type: property, field: n, operator: equals, value: 1e" + strings.Repeat("9", size-200) + "}\n", "gates.value"},
	}
}

// TestParseHostile: documents built to cost time or memory (alias
// expansion, nesting, sheer count, numbers and durations past every
// bound, keys as long as the document) are refused fast, on the field
// that names the problem, with an error of bounded size.
func TestParseHostile(t *testing.T) {
	t.Parallel()
	// The bound is relative to this machine now: the time to parse an
	// ordinary document of the same size (the best of three), so a loaded
	// machine (CI runs packages side by side on two cores) slows both. A
	// parser doing unbounded work on a hostile document is slower than a
	// linear multiple of that by orders of magnitude.
	var ordinary string
	for _, h := range hostileDocs(MaxSourceBytes) {
		if h.desc == "steps" {
			ordinary = h.src
		}
	}
	baseline := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		_, _ = Parse([]byte(ordinary), Options{})
		baseline = min(baseline, time.Since(start))
	}
	limit := 30*baseline + 200*time.Millisecond
	for _, h := range hostileDocs(MaxSourceBytes) {
		t.Run(h.desc, func(t *testing.T) {
			t.Parallel()
			if len(h.src) > MaxSourceBytes {
				t.Fatalf("test document of %d bytes", len(h.src))
			}
			start := time.Now()
			_, err := Parse([]byte(h.src), Options{})
			if took := time.Since(start); took > limit {
				t.Errorf("took %v, more than 30 times an ordinary document's %v", took, baseline)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			checkRefusal(t, []byte(h.src), err)
			if f := fieldsOf(t, err); f[h.field] == nil {
				t.Errorf("fields %.300v, want %s", f, h.field)
			}
		})
	}
}
