package engine_test

import (
	"context"
	"strings"
	"testing"

	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/templates"
)

// A message whose template refuses it (ADDENDUM 24) fails at once, with
// the reason first in its lastError: missing_variables for a strict
// template whose context lacks a variable, partial_missing for a template
// naming a partial that does not exist.
func TestStepFailsWithTheTemplatesReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_refused")
	// welcome reads {{ name }}, which a sequence's context never has.
	if _, _, err := f.Svc.Templates.Put(ctx, f.Tenant, "welcome", templates.Put{StrictVariables: new(true)}); err != nil {
		t.Fatal(err)
	}
	content := "<p>Hi</p>{% include 'sig' %}"
	if _, _, err := f.Svc.Templates.Put(ctx, f.Tenant, "tips", templates.Put{Content: &content}); err != nil {
		t.Fatal(err)
	}
	f.PutSequence("strict", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.PutSequence("partial", "name: P\ntrigger: {event: go}\nsteps: [{send: tips}]\n", true)
	f.Event("go", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeDead, engine.OutcomeDead)
	dead := f.Scheduled("dead", "")
	got := map[string]string{}
	for _, s := range dead {
		if s.LastError != nil {
			got[s.TemplateID] = *s.LastError
		}
	}
	if !strings.HasPrefix(got["welcome"], "missing_variables: name") || !strings.HasPrefix(got["tips"], "partial_missing: sig") {
		t.Fatalf("lastError %q", got)
	}
	if f.SG.Count() != 0 {
		t.Fatal("a refused message was sent")
	}
}
