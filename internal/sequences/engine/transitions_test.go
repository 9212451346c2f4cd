package engine

import (
	"encoding/json"
	"testing"
	"time"

	"tidings/internal/rules"
	"tidings/internal/sequences/definition"
	"tidings/queries"
)

// decide is the engine's one decision before an email step (ADDENDUM 6
// order: built-in gates, the YAML gates, the exit condition, the step's
// conditions), taken without I/O on what the run read; event leaves ask
// the events the test says the contact has.
func TestDecide(t *testing.T) {
	t.Parallel()
	src := `name: D
trigger: {event: go}
gates: {operator: and, conditions: [{type: property, field: country, operator: equals, value: NL}]}
exit: {operator: or, conditions: [{type: event, name: bought, operator: occurred}]}
steps:
  - id: first
    action: email
    template: t
    conditions: {operator: and, conditions: [{type: derived, field: totalOpens, operator: greaterThan, value: 0}]}
`
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq := Sequence{ID: "d", Enabled: true, Version: 1, Def: def}
	tenant := queries.Tenant{ID: "ten", SendingStatus: "enabled"}
	contact := func(props string, opens int64, sub, supp bool) queries.Contact {
		return queries.Contact{TenantID: "ten", ID: "c", Email: "ann@example.com", Properties: json.RawMessage(props),
			TotalOpens: opens, Subscribed: sub, Suppressed: supp, CreatedAt: time.Now()}
	}
	tests := []struct {
		desc      string
		seqOn     bool
		tenant    queries.Tenant
		contact   queries.Contact
		events    []string
		want      string
		lastStage string
	}{
		{"everything holds", true, tenant, contact(`{"country":"NL"}`, 1, true, false), nil, WouldSend, "step_conditions"},
		{"sequence disabled", false, tenant, contact(`{"country":"NL"}`, 1, true, false), nil, WouldBlock, "gates"},
		{"unsubscribed", true, tenant, contact(`{"country":"NL"}`, 1, false, false), nil, WouldBlock, "gates"},
		{"suppressed", true, tenant, contact(`{"country":"NL"}`, 1, true, true), nil, WouldBlock, "gates"},
		{"sandbox, not whitelisted", true, queries.Tenant{ID: "ten", SendingStatus: "sandbox"},
			contact(`{"country":"NL"}`, 1, true, false), nil, WouldBlock, "gates"},
		{"sandbox, whitelisted", true, queries.Tenant{ID: "ten", SendingStatus: "sandbox",
			SandboxWhitelist: []string{"ann@example.com"}}, contact(`{"country":"NL"}`, 1, true, false), nil, WouldSend, "step_conditions"},
		{"paused tenant is no gate", true, queries.Tenant{ID: "ten", SendingStatus: "paused"},
			contact(`{"country":"NL"}`, 1, true, false), nil, WouldSend, "step_conditions"},
		{"yaml gate fails", true, tenant, contact(`{"country":"DE"}`, 1, true, false), nil, WouldBlock, "gates"},
		{"exit holds", true, tenant, contact(`{"country":"NL"}`, 1, true, false), []string{"bought"}, WouldExit, "exit_conditions"},
		{"gate before exit", true, tenant, contact(`{"country":"DE"}`, 1, true, false), []string{"bought"}, WouldBlock, "gates"},
		{"step condition false", true, tenant, contact(`{"country":"NL"}`, 0, true, false), nil, WouldSkip, "step_conditions"},
		{"exit before step condition", true, tenant, contact(`{"country":"NL"}`, 0, true, false), []string{"bought"}, WouldExit, "exit_conditions"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			props, err := rules.DecodeProperties(tt.contact.Properties)
			if err != nil {
				t.Fatal(err)
			}
			evr := &evaluator{subject: rules.Subject{Properties: props, TotalOpens: tt.contact.TotalOpens,
				CreatedAt: tt.contact.CreatedAt},
				env: rules.Env{Now: time.Now(), HasEvent: func(name string, _ time.Time) bool {
					for _, e := range tt.events {
						if e == name {
							return true
						}
					}
					return false
				}}}
			s := seq
			s.Enabled = tt.seqOn
			d := decide(evr, tt.contact, tt.tenant, s, def.Steps[0], definition.BranchDefault)
			if d.err != nil || d.outcome != tt.want {
				t.Fatalf("outcome %q (%v), want %q; path %v", d.outcome, d.err, tt.want, d.path)
			}
			if got := d.path[len(d.path)-1]["stage"]; got != tt.lastStage {
				t.Errorf("last stage %v, want %s", got, tt.lastStage)
			}
		})
	}
}

// Which reasons of an exit cancel the enrolment's open sends with the same
// reason: every cancelReason of ADDENDUM 7; send_failed ends the
// enrolment of a send that is already dead and cancels nothing.
func TestCancelReason(t *testing.T) {
	t.Parallel()
	for _, r := range cancelReasonsForTest() {
		if !cancelReason(r) {
			t.Errorf("%s does not cancel", r)
		}
	}
	for _, r := range []string{ReasonSendFailed, "", "completed", "nope"} {
		if cancelReason(r) {
			t.Errorf("%q cancels", r)
		}
	}
}

// cancelReasonsForTest are ADDENDUM 7's cancel reasons, spelled out here
// rather than taken from the code under test.
func cancelReasonsForTest() []string {
	return []string{"contact_deleted", "unsubscribed", "suppressed", "sequence_deleted", "exit_condition",
		"gate_blocked", "manual", "step_removed"}
}
