package api

import (
	"strings"
	"testing"
)

// ADDENDUM 3 (changed): an unknown body field or query parameter is a
// VALIDATION_ERROR naming it and, when one is close, the field meant; it
// changes nothing. Malformed JSON names its line and column.
func TestUnknownFieldsAndParamsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_unknown"))
	content := `<mjml><mj-body><mj-section><mj-column><mj-text>Hi</mj-text></mj-column></mj-section></mj-body></mjml>`
	tests := []struct {
		desc, method, path string
		body               any
		field, want        string
	}{
		{"misspelled enabled", "PUT", "/api/templates/t1", map[string]any{"name": "T", "subject": "S", "content": content,
			"enabeld": false}, "enabeld", "did you mean enabled?"},
		{"data for variables", "POST", "/api/send", map[string]any{"to": "a@example.com", "template": "t1",
			"data": map[string]any{"x": 1}}, "data", "is not a known field"},
		{"near a field", "POST", "/api/contacts", map[string]any{"email": "a@example.com", "userID2": "u"}, "userID2",
			"did you mean userId?"},
		{"since on sends", "GET", "/api/sends?since=2026-01-01", nil, "since", "is not a known query parameter"},
		{"email on sends", "GET", "/api/sends?email=a@example.com", nil, "email", "is not a known query parameter"},
		{"transposed limit", "GET", "/api/contacts?limti=5", nil, "limti", "did you mean limit?"},
		{"a route without parameters", "GET", "/api/tenant?x=1", nil, "x", "this route takes none"},
	}
	for _, tt := range tests {
		r := b.expectError(tt.method, tt.path, tok, tt.body, 400, "VALIDATION_ERROR")
		msgs, ok := r.fields()[tt.field].([]any)
		if !ok || len(msgs) == 0 || !strings.Contains(msgs[0].(string), tt.want) {
			t.Errorf("%s: fields %v, want %s: %q", tt.desc, r.fields(), tt.field, tt.want)
		}
	}
	// Nothing was created by the refused requests.
	b.expectError("GET", "/api/templates/t1", tok, nil, 404, "TEMPLATE_NOT_FOUND")
	if items := b.expect("GET", "/api/contacts", tok, nil, 200).items(); len(items) != 0 {
		t.Fatalf("contacts %v", items)
	}
	// Free-form objects take any key.
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "a@example.com",
		"properties": map[string]any{"enabeld": true, "anything": "goes"}}, 201)

	for _, tc := range []struct{ body, where string }{
		{"{\"email\": \"a@example.com\",\n  \"userId\": }", "line 2, column 13"},
		{"{\"email\": \"a@example.com\"", "line 1, column 26"},
		{"{\n\n  \"email\" \"x\"}", "line 3, column 11"},
	} {
		r := b.expectError("POST", "/api/contacts", tok, tc.body, 400, "VALIDATION_ERROR")
		msgs, _ := r.fields()["body"].([]any)
		if len(msgs) == 0 || !strings.Contains(msgs[0].(string), tc.where) {
			t.Errorf("%q: %v, want %s", tc.body, r.fields(), tc.where)
		}
	}
}
