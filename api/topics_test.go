package api

import (
	"strings"
	"testing"
)

// The topic routes, and topics on contacts and templates.
func TestTopicRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_topics"))
	r := b.expect("POST", "/api/topics", tok, map[string]any{"topicId": "news", "name": "Product news", "default": "opt_out"}, 201)
	if r.body["topicId"] != "news" || r.body["default"] != "opt_out" || r.body["description"] != "" {
		t.Fatalf("%s", r.raw)
	}
	b.expect("POST", "/api/topics", tok, map[string]any{"topicId": "digest", "name": "Digest", "default": "opt_in",
		"description": "Weekly"}, 201)
	b.expectError("POST", "/api/topics", tok, map[string]any{"topicId": "news", "name": "Again", "default": "opt_in"}, 409, "CONFLICT")
	b.expectError("POST", "/api/topics", tok, map[string]any{"topicId": "x", "name": "X", "default": "maybe"}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/topics", tok, map[string]any{"topicId": "x", "name": "X", "defualt": "opt_in"}, 400, "VALIDATION_ERROR")
	if l := b.expect("GET", "/api/topics", tok, nil, 200); len(l.items()) != 2 {
		t.Fatalf("%s", l.raw)
	}
	if u := b.expect("PATCH", "/api/topics/news", tok, map[string]any{"description": "What ships"}, 200); u.body["description"] != "What ships" || u.body["name"] != "Product news" {
		t.Fatalf("%s", u.raw)
	}
	b.expectError("PATCH", "/api/topics/news", tok, map[string]any{"default": "opt_in"}, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/topics/nope", tok, nil, 404, "NOT_FOUND")

	// Contacts carry their choices; an unknown topic is refused, null
	// removes a choice.
	c := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "ann@example.com", "topics": map[string]any{"digest": true}}, 201)
	id := c.body["contactId"].(string)
	if c.body["topics"].(map[string]any)["digest"] != true {
		t.Fatalf("%s", c.raw)
	}
	r = b.expectError("PATCH", "/api/contacts/"+id, tok, map[string]any{"topics": map[string]any{"nope": true}}, 400, "VALIDATION_ERROR")
	if _, ok := r.fields()["topics.nope"]; !ok {
		t.Fatalf("%s", r.raw)
	}
	p := b.expect("PATCH", "/api/contacts/"+id, tok, map[string]any{"topics": map[string]any{"digest": nil, "news": false}}, 200)
	if tp := p.body["topics"].(map[string]any); len(tp) != 1 || tp["news"] != false {
		t.Fatalf("%s", p.raw)
	}
	u := b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "ann@example.com", "topics": map[string]any{"digest": true}}, 200)
	if tp := u.body["topics"].(map[string]any); len(tp) != 2 || tp["digest"] != true {
		t.Fatalf("%s", u.raw)
	}

	// Templates name a topic (unknown: NOT_FOUND); a named topic cannot be
	// deleted.
	tmpl := map[string]any{"name": "W", "subject": "W", "topic": "digest",
		"content": "<mjml><mj-body><mj-section><mj-column><mj-text>w</mj-text></mj-column></mj-section></mj-body></mjml>"}
	if r := b.expect("PUT", "/api/templates/weekly", tok, tmpl, 201); r.body["topic"] != "digest" {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("PUT", "/api/templates/weekly", tok, map[string]any{"topic": "nope"}, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/topics/digest", tok, nil, 400, "VALIDATION_ERROR")
	if r := b.expect("PUT", "/api/templates/weekly", tok, map[string]any{"topic": nil}, 200); r.body["topic"] != nil || r.body["currentVersion"] != float64(1) {
		t.Fatalf("clearing the topic: %s", r.raw)
	}
	b.expect("DELETE", "/api/topics/digest", tok, nil, 204)
	// Sequences and broadcasts name topics that exist.
	b.putYAML("/api/sequences/s1", tok, "text/yaml", "name: S\ntopic: gone\ntrigger: {event: e}\nsteps: [{send: weekly}]\n", 404)
	b.putYAML("/api/sequences/s1", tok, "text/yaml", "name: S\ntopic: news\ntrigger: {event: e}\nsteps: [{send: weekly}]\n", 201)
	b.expectError("DELETE", "/api/topics/news", tok, nil, 400, "VALIDATION_ERROR")
}

// A sequence, template or broadcast naming a topic that does not exist is
// refused with a message naming that topic (the examples' onboarding
// sequence names `news`, which a new tenant must create first).
func TestMissingTopicIsNamed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_topic_named"))
	b.expect("PUT", "/api/templates/welcome", tok, map[string]any{"name": "W", "subject": "Hi",
		"content": "<mjml><mj-body><mj-section><mj-column><mj-text>Hi</mj-text></mj-column></mj-section></mj-body></mjml>"}, 201)
	r := b.expectError("PUT", "/api/sequences/onboarding", tok, map[string]any{
		"content": "name: O\ntrigger: {event: go}\ntopic: news\nsteps: [{send: welcome}]\n"}, 404, "NOT_FOUND")
	if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"news"`) {
		t.Fatalf("the message does not name the topic: %s", r.raw)
	}
}
