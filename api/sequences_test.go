package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"tidings/internal/config"
)

// seqYAML is a valid definition sending templates welcome and tips, with a
// trailing delay (a warning).
const seqYAML = `name: Onboarding
trigger:
  event: user.signed_up
steps:
  - send: welcome
  - delay: 1d
  - id: tips
    action: email
    template: tips
  - delay: 3d
`

// seqSetup provisions org with templates welcome and tips and segment vip,
// returning an API key.
func seqSetup(t *testing.T, b *bundle, org string) string {
	t.Helper()
	tok := b.apiKey(b.tenant(org))
	for _, q := range []string{
		`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES ($1, 'welcome', 'Welcome', 'Hi', 'x', 'x')`,
		`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES ($1, 'tips', 'Tips', 'Hi', 'x', 'x')`,
		`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'vip', 'VIP', '{"operator":"and","conditions":[]}')`,
	} {
		if _, err := b.db.Pool.Exec(t.Context(), q, org); err != nil {
			t.Fatal(err)
		}
	}
	return tok
}

// putYAML sends body raw with the content type (none when empty).
func (b *bundle) putYAML(path, token, contentType, body string, status int) resp {
	b.t.Helper()
	req := httptest.NewRequest("PUT", path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != status {
		b.t.Fatalf("PUT %s: status %d, want %d; body %s", path, res.StatusCode, status, raw)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			b.t.Fatalf("not JSON: %s", raw)
		}
	}
	return r
}

func TestSequencePutRawYAMLAndJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := seqSetup(t, b, "org_seq")

	r := b.putYAML("/api/sequences/onboarding", tok, "text/yaml", seqYAML, 201)
	want := map[string]any{"sequenceId": "onboarding", "name": "Onboarding", "version": 1.0, "enabled": true,
		"triggerEvent": "user.signed_up"}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("%s = %v, want %v (%s)", k, r.body[k], v, r.raw)
		}
	}
	if w, _ := r.body["warnings"].([]any); len(w) != 1 {
		t.Errorf("warnings %s", r.raw)
	}
	for _, k := range []string{"content", "steps"} {
		if _, ok := r.body[k]; ok {
			t.Errorf("PUT echoed %s: %s", k, r.raw)
		}
	}
	created := r.body["createdAt"]
	if created == nil || r.body["updatedAt"] != created {
		t.Errorf("timestamps %s", r.raw)
	}

	// The same body again: 200, nothing changes.
	again := b.putYAML("/api/sequences/onboarding", tok, "text/yaml", seqYAML, 200)
	if again.body["version"] != 1.0 || again.body["updatedAt"] != r.body["updatedAt"] {
		t.Errorf("no-op PUT changed something: %s", again.raw)
	}
	// No content type, or a non-JSON one, is YAML too.
	b.putYAML("/api/sequences/onboarding", tok, "", seqYAML, 200)
	b.putYAML("/api/sequences/onboarding", tok, "application/x-yaml", seqYAML, 200)

	// JSON wrapper: name overrides the YAML's; enabled is taken on create.
	noWarn := "trigger: {event: trial.started}\nsteps: [{send: welcome}]\n"
	j := b.expect("PUT", "/api/sequences/trial", tok, map[string]any{"content": noWarn, "name": "Trial", "enabled": false}, 201)
	if j.body["name"] != "Trial" || j.body["enabled"] != false || j.body["triggerEvent"] != "trial.started" {
		t.Errorf("%s", j.raw)
	}
	if _, ok := j.body["warnings"]; ok {
		t.Errorf("warnings present without any: %s", j.raw)
	}
	// Disabled stays disabled on a PUT with new content, whatever it says.
	j = b.expect("PUT", "/api/sequences/trial", tok, map[string]any{"content": noWarn + "# v2\n", "enabled": true}, 200)
	if j.body["enabled"] != false || j.body["version"] != 2.0 || j.body["name"] != "Trial" {
		t.Errorf("%s", j.raw)
	}
	// A name-only change makes no version.
	j = b.expect("PUT", "/api/sequences/trial", tok, map[string]any{"content": noWarn + "# v2\n", "name": "Trial 2"}, 200)
	if j.body["version"] != 2.0 || j.body["name"] != "Trial 2" {
		t.Errorf("%s", j.raw)
	}
}

func TestSequencePutErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeSequences = 2 })
	tok := seqSetup(t, b, "org_seqerr")
	tests := []struct {
		desc, path, ct, body string
		status               int
		code                 string
		field, msg           string // a details.fields entry and the start of its message
	}{
		{desc: "invalid YAML", path: "/api/sequences/x", ct: "text/yaml", body: "name: [", status: 400,
			code: "VALIDATION_ERROR", field: "content", msg: "is not valid YAML"},
		{desc: "missing name on create", path: "/api/sequences/x", ct: "text/yaml",
			body: "trigger:\n  event: a\nsteps:\n  - send: welcome\n", status: 400, code: "VALIDATION_ERROR",
			field: "name", msg: "line 1: is required"},
		{desc: "missing trigger event", path: "/api/sequences/x", ct: "text/yaml",
			body: "name: x\ntrigger:\n  reenroll: true\nsteps:\n  - send: welcome\n", status: 400, code: "VALIDATION_ERROR",
			field: "trigger.event", msg: "line 2: is required"},
		{desc: "bad step names path and line", path: "/api/sequences/x", ct: "text/yaml",
			body: "name: x\ntrigger: {event: a}\nsteps:\n  - send: welcome\n  - delay: soon\n", status: 400,
			code: "VALIDATION_ERROR", field: "steps[1].delay", msg: "line 5:"},
		{desc: "unknown segment", path: "/api/sequences/x", ct: "text/yaml",
			body:   "name: x\ntrigger: {event: a}\nexit: {type: segment, segmentId: nope, operator: memberOf}\nsteps: [{send: welcome}]\n",
			status: 400, code: "VALIDATION_ERROR", field: "exit.segmentId", msg: "unknown segment nope"},
		{desc: "unknown template", path: "/api/sequences/x", ct: "text/yaml",
			body: "name: x\ntrigger: {event: a}\nsteps: [{send: welcome}, {send: nope}]\n", status: 404, code: "TEMPLATE_NOT_FOUND"},
		{desc: "bad id", path: "/api/sequences/-bad", ct: "text/yaml", body: seqYAML, status: 400,
			code: "VALIDATION_ERROR", field: "sequenceId", msg: "must match"},
		{desc: "JSON without content", path: "/api/sequences/x", ct: "application/json", body: `{"name": "x"}`, status: 400,
			code: "VALIDATION_ERROR", field: "content", msg: "is required"},
		{desc: "JSON content of the wrong type", path: "/api/sequences/x", ct: "application/json", body: `{"content": 1}`,
			status: 400, code: "VALIDATION_ERROR", field: "content", msg: "must be a string"},
		{desc: "JSON enabled of the wrong type", path: "/api/sequences/x", ct: "application/json",
			body: `{"content": "x", "enabled": "yes"}`, status: 400, code: "VALIDATION_ERROR", field: "enabled", msg: "must be a boolean"},
		{desc: "JSON blank name", path: "/api/sequences/x", ct: "application/json",
			body: `{"content": "trigger: {event: a}\nsteps: [{send: welcome}]", "name": " "}`, status: 400,
			code: "VALIDATION_ERROR", field: "name", msg: "must not be blank"},
		{desc: "malformed JSON", path: "/api/sequences/x", ct: "application/json", body: `{"content": `, status: 400,
			code: "VALIDATION_ERROR", field: "body"},
	}
	for _, tt := range tests {
		r := b.putYAML(tt.path, tok, tt.ct, tt.body, tt.status)
		if r.code() != tt.code {
			t.Errorf("%s: code %q, want %q: %s", tt.desc, r.code(), tt.code, r.raw)
			continue
		}
		if tt.field != "" {
			msgs, _ := r.fields()[tt.field].([]any)
			if len(msgs) == 0 || !strings.HasPrefix(msgs[0].(string), tt.msg) {
				t.Errorf("%s: fields %v, want %s: %s...", tt.desc, r.fields(), tt.field, tt.msg)
			}
		}
	}
	// Nothing was created by the failures.
	b.expectError("GET", "/api/sequences/x", tok, nil, 404, "SEQUENCE_NOT_FOUND")

	// Plan limit on create only.
	b.putYAML("/api/sequences/a", tok, "text/yaml", seqYAML, 201)
	b.putYAML("/api/sequences/b", tok, "text/yaml", seqYAML, 201)
	r := b.putYAML("/api/sequences/c", tok, "text/yaml", seqYAML, 402)
	if r.code() != "PLAN_LIMIT_EXCEEDED" {
		t.Errorf("%s", r.raw)
	}
	b.putYAML("/api/sequences/b", tok, "text/yaml", seqYAML+"# edit\n", 200)
	b.expect("DELETE", "/api/sequences/a", tok, nil, 204)
	b.putYAML("/api/sequences/c", tok, "text/yaml", seqYAML, 201)
}

func TestSequencePatchGetListDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := seqSetup(t, b, "org_seqp")
	b.putYAML("/api/sequences/onb", tok, "text/yaml", seqYAML, 201)

	g := b.expect("GET", "/api/sequences/onb", tok, nil, 200)
	if g.body["content"] != seqYAML || g.body["triggerEvent"] != "user.signed_up" || g.body["version"] != 1.0 {
		t.Errorf("GET %s", g.raw)
	}
	steps, _ := g.body["steps"].([]any)
	if len(steps) != 4 || fmt.Sprint(steps[0]) != "map[action:email id:step-1 template:welcome]" ||
		fmt.Sprint(steps[1]) != "map[action:delay duration:1d id:step-2]" || fmt.Sprint(steps[2]) != "map[action:email id:tips template:tips]" {
		t.Errorf("steps %v", steps)
	}
	if _, ok := g.body["warnings"]; ok {
		t.Errorf("GET carries warnings: %s", g.raw)
	}

	// PATCH answers the GET shape.
	p := b.expect("PATCH", "/api/sequences/onb", tok, map[string]any{"name": "Renamed"}, 200)
	if p.body["name"] != "Renamed" || p.body["version"] != 1.0 || p.body["content"] != seqYAML || len(p.body["steps"].([]any)) != 4 {
		t.Errorf("PATCH name: %s", p.raw)
	}
	p = b.expect("PATCH", "/api/sequences/onb", tok, map[string]any{"enabled": false}, 200)
	if p.body["enabled"] != false || p.body["version"] != 1.0 {
		t.Errorf("PATCH enabled: %s", p.raw)
	}
	p = b.expect("PATCH", "/api/sequences/onb", tok, map[string]any{"triggerEvent": "trial.started"}, 200)
	if p.body["triggerEvent"] != "trial.started" || p.body["version"] != 2.0 || p.body["enabled"] != false {
		t.Errorf("PATCH trigger: %s", p.raw)
	}
	for _, tt := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "body"},
		{map[string]any{"unknown": 1}, "unknown"}, // ADDENDUM 3: unknown fields are refused
		{map[string]any{"triggerEvent": "email.opened"}, "triggerEvent"},
		{map[string]any{"triggerEvent": ""}, "triggerEvent"},
		{map[string]any{"triggerEvent": nil}, "triggerEvent"},
		{map[string]any{"name": ""}, "name"},
		{map[string]any{"name": 5}, "name"},
		{map[string]any{"enabled": "no"}, "enabled"},
		{map[string]any{"enabled": nil}, "enabled"},
	} {
		r := b.expectError("PATCH", "/api/sequences/onb", tok, tt.body, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[tt.field]; !ok {
			t.Errorf("PATCH %v: fields %v, want %s", tt.body, r.fields(), tt.field)
		}
	}
	b.expectError("PATCH", "/api/sequences/nope", tok, map[string]any{"name": "x"}, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("GET", "/api/sequences/nope", tok, nil, 404, "SEQUENCE_NOT_FOUND")

	// List: newest first, without content, paged.
	for i := range 3 {
		b.putYAML(fmt.Sprintf("/api/sequences/s%d", i), tok, "text/yaml", seqYAML, 201)
	}
	all := collect(b, tok, "/api/sequences?limit=2")
	var ids []string
	for _, it := range all {
		ids = append(ids, it["sequenceId"].(string))
		if _, ok := it["content"]; ok {
			t.Errorf("list item with content: %v", it)
		}
		if _, ok := it["version"].(float64); !ok {
			t.Errorf("list item without version: %v", it)
		}
	}
	if fmt.Sprint(ids) != "[s2 s1 s0 onb]" {
		t.Errorf("list %v", ids)
	}
	b.expectError("GET", "/api/sequences?limit=101", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/sequences?cursor=forged", tok, nil, 400, "VALIDATION_ERROR")

	// Delete: 204, then 404; a campaign that lists it keeps the id.
	cmp := b.expect("POST", "/api/campaigns", tok, map[string]any{"name": "C", "sequenceIds": []string{"onb"}}, 201)
	b.expect("DELETE", "/api/sequences/onb", tok, nil, 204)
	b.expectError("DELETE", "/api/sequences/onb", tok, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("GET", "/api/sequences/onb", tok, nil, 404, "SEQUENCE_NOT_FOUND")
	c := b.expect("GET", "/api/campaigns/"+cmp.body["campaignId"].(string), tok, nil, 200)
	if fmt.Sprint(c.body["sequenceIds"]) != "[onb]" {
		t.Errorf("campaign lost the deleted sequence's id: %s", c.raw)
	}
}

func TestSequenceSends(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := seqSetup(t, b, "org_seqs")
	b.putYAML("/api/sequences/onb", tok, "text/yaml", seqYAML, 201)
	b.putYAML("/api/sequences/other", tok, "text/yaml", seqYAML, 201)
	for _, q := range []string{
		`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_1', 'ann@example.com')`,
		`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, from_address, to_address,
			subject, sent_at, sequence_id, step_id) VALUES
			($1, 'snd_1', 'm1', 'cnt_1', 'welcome', 1, 'a@acme.test', 'ann@example.com', 'Hi', now() - interval '2 minutes', 'onb', 'step-1'),
			($1, 'snd_2', 'm2', 'cnt_1', 'tips', 1, 'a@acme.test', 'ann@example.com', 'Tips', now() - interval '1 minute', 'onb', 'tips'),
			($1, 'snd_3', 'm3', 'cnt_1', 'welcome', 1, 'a@acme.test', 'ann@example.com', 'Hi', now(), 'other', 'step-1'),
			($1, 'snd_4', 'm4', 'cnt_1', 'welcome', 1, 'a@acme.test', 'ann@example.com', 'Hi', now(), NULL, NULL)`,
	} {
		if _, err := b.db.Pool.Exec(t.Context(), q, "org_seqs"); err != nil {
			t.Fatal(err)
		}
	}
	all := collect(b, tok, "/api/sequences/onb/sends?limit=1")
	if len(all) != 2 || all[0]["sendId"] != "snd_2" || all[0]["sequenceId"] != "onb" || all[0]["stepId"] != "tips" || all[1]["sendId"] != "snd_1" {
		t.Errorf("sends %v", all)
	}
	b.expectError("GET", "/api/sequences/nope/sends", tok, nil, 404, "SEQUENCE_NOT_FOUND")
	other := b.apiKey(b.tenant("org_seqs2"))
	b.expectError("GET", "/api/sequences/onb/sends", other, nil, 404, "SEQUENCE_NOT_FOUND")
}

func TestSequenceTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := seqSetup(t, b, "org_seqa")
	other := seqSetup(t, b, "org_seqb")
	b.putYAML("/api/sequences/onb", a, "text/yaml", seqYAML, 201)
	b.expectError("GET", "/api/sequences/onb", other, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("PATCH", "/api/sequences/onb", other, map[string]any{"enabled": false}, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("DELETE", "/api/sequences/onb", other, nil, 404, "SEQUENCE_NOT_FOUND")
	if l := b.expect("GET", "/api/sequences", other, nil, 200); len(l.items()) != 0 {
		t.Errorf("%s", l.raw)
	}
	// The other tenant's PUT of the same id creates its own.
	r := b.putYAML("/api/sequences/onb", other, "text/yaml", "name: Theirs\ntrigger: {event: b}\nsteps: [{send: welcome}]\n", 201)
	if r.body["name"] != "Theirs" {
		t.Errorf("%s", r.raw)
	}
	g := b.expect("GET", "/api/sequences/onb", a, nil, 200)
	if g.body["name"] != "Onboarding" || g.body["enabled"] != true || g.body["content"] != seqYAML || g.body["version"] != 1.0 {
		t.Errorf("another tenant touched it: %s", g.raw)
	}
}

// A sequence naming a template that does not exist says which step
// (details.fields by step path), and YAML sent as JSON says to send it as
// YAML.
func TestSequencePutSaysWhichStepAndHowToSendYAML(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_seq_hint"))
	r := b.putYAML("/api/sequences/s", tok, "text/yaml",
		"name: S\ntrigger: {event: go}\nsteps:\n  - delay: 1d\n  - send: nope\n", 404)
	if r.code() != "TEMPLATE_NOT_FOUND" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if msgs, ok := r.fields()["steps[1].template"].([]any); !ok || !strings.Contains(fmt.Sprint(msgs), "nope") {
		t.Fatalf("fields %v", r.fields())
	}
	y := b.putYAML("/api/sequences/s", tok, "application/json", "name: S\ntrigger: {event: go}\nsteps: [{delay: 1d}]\n", 400)
	msgs, _ := y.fields()["body"].([]any)
	if len(msgs) == 0 || !strings.Contains(msgs[0].(string), "text/yaml") {
		t.Fatalf("YAML as JSON: %d %s", y.status, y.raw)
	}
}

// The definitions API drives the engine: PATCH enabled pauses and resumes
// enrolments, DELETE cancels pending sends (sequence_deleted).
func TestSequenceAPIDrivesEngine(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_api")
	b := f.b
	r := b.do("PUT", "/api/sequences/drip", f.key, map[string]any{
		"content": "name: Drip\ntrigger: {event: go}\nsteps:\n  - delay: 1d\n  - send: welcome\n"})
	if r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.raw)
	}
	ev := f.event("go", nil)
	if got := toStrings(ev.body["triggeredSequences"]); len(got) != 1 || got[0] != "drip" {
		t.Fatalf("triggered %v", ev.body["triggeredSequences"])
	}
	b.expect("PATCH", "/api/sequences/drip", f.key, map[string]any{"enabled": false}, 200)
	if e := f.enrolment("drip"); e["status"] != "paused" {
		t.Fatalf("after disable: %v", e)
	}
	b.expect("PATCH", "/api/sequences/drip", f.key, map[string]any{"enabled": true}, 200)
	if e := f.enrolment("drip"); e["status"] != "active" {
		t.Fatalf("after enable: %v", e)
	}
	b.expect("DELETE", "/api/sequences/drip", f.key, nil, 204)
	c := f.scheduled("status=cancelled")
	if len(c) != 1 || c[0]["cancelReason"] != "sequence_deleted" {
		t.Fatalf("cancelled after delete: %v", c)
	}
	if p := f.scheduled("status=pending"); len(p) != 0 {
		t.Fatalf("pending after delete: %v", p)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
