package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// encodeJSON costs what json.Marshal costs (it is the escaping it drops,
// not the speed): compare the two sub-benchmarks.
func BenchmarkEncodeJSON(b *testing.B) {
	v := map[string]any{"items": []apiKeyJSON{{KeyID: "key_1", TenantID: "org", Name: "a <b> & c",
		KeyPrefix: "tdk_abcdefgh", Status: "active", CreatedAt: "2026-01-01T00:00:00.000Z"}},
		"html": strings.Repeat("<p>x &amp; y</p>", 200)}
	for name, enc := range map[string]func(any) ([]byte, error){"encodeJSON": encodeJSON, "json.Marshal": json.Marshal} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestEncodeJSONMatchesMarshalButForHTML(t *testing.T) {
	t.Parallel()
	v := map[string]any{"a": "plain", "n": 1.5, "list": []string{"x"}, "nested": map[string]any{"b": nil}}
	want, _ := json.Marshal(v)
	got, err := encodeJSON(v)
	if err != nil || string(got) != string(want) {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got, _ := encodeJSON("<a href=\"x?a=1&b=2\">"); string(got) != `"<a href=\"x?a=1&b=2\">"` {
		t.Fatalf("got %s", got)
	}
	if _, err := encodeJSON(func() {}); err == nil {
		t.Fatal("an unencodable value must fail")
	}
}
