package storable

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, in string
		ok       bool
	}{
		{desc: "plain", in: "cnt_123", ok: true},
		{desc: "unicode", in: "Bücher ✓ 😀", ok: true},
		{desc: "replacement character itself", in: "\uFFFD", ok: true},
		{desc: "NUL", in: "a\x00b"},
		{desc: "invalid UTF-8", in: "\xff"},
		{desc: "truncated sequence", in: "\xe2\x82"},
		{desc: "encoded surrogate (CESU)", in: "\xed\xa0\x80"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); (got == "") != tt.ok {
			t.Errorf("%s: Text(%q) = %q", tt.desc, tt.in, got)
		}
	}
}

func TestNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"0", true}, {"-0", true}, {"1", true}, {"-42.5", true}, {"1.50", true},
		{"18446744073709551615", true}, {"-9223372036854775808", true}, // uint64, int64
		{"99999999999999999999", true}, {"100000000000000000000", false}, // 20 and 21 digits
		{"1e19", true}, {"1E+19", true}, {"1e20", false}, {"1e99999", false}, {"1e131072", false},
		{"0.00000000000000000001", true}, {"1e-20", true}, {"1e-21", false}, {"1e-16384", false},
		{"0.000000000000000000000", false}, // scale 21, kept by numeric
		{"1.000000000000000000000", false},
		{"0e99999", false}, {"0e5", true}, {"0e-20", true}, {"0e-21", false},
		{"123.456e2", true}, {"0.001e22", true}, {"0.001e23", false},
		{"1e99999999999999999999", false}, {"1e-99999999999999999999", false},
		{"12345678901234567890.12345678901234567890", true},
	}
	for _, tt := range tests {
		if got := Number(tt.in); (got == "") != tt.ok {
			t.Errorf("Number(%s) = %q, want ok=%v", tt.in, got, tt.ok)
		}
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, doc, path, problem string
	}{
		{desc: "fine", doc: `{"a":"x","b":[1,"\u00e9",{"c":"\ud83d\ude00"}],"d":null}`},
		{desc: "escaped backslash before u0000 text", doc: `{"a":"\\u0000"}`},
		{desc: "NUL escape", doc: `{"email":"a\u0000b"}`, path: "email", problem: msgNUL},
		{desc: "NUL in nested value", doc: `{"properties":{"k":["x","\u0000"]}}`, path: "properties.k[1]", problem: msgNUL},
		{desc: "lone high surrogate", doc: `{"properties":{"k":"\ud800"}}`, path: "properties.k", problem: msgSurrogate},
		{desc: "high surrogate then other escape", doc: `{"k":"\ud800\u0041"}`, path: "k", problem: msgSurrogate},
		{desc: "lone low surrogate", doc: `{"k":"x\udc00"}`, path: "k", problem: msgSurrogate},
		{desc: "surrogate in key", doc: `{"properties":{"\ud800x":1}}`, path: "properties.\uFFFDx", problem: msgSurrogate},
		{desc: "NUL in key", doc: `{"a\u0000":1}`, path: "a", problem: msgNUL},
		{desc: "invalid UTF-8 value", doc: "{\"name\":\"\xff\"}", path: "name", problem: msgUTF8},
		{desc: "invalid UTF-8 key", doc: "{\"p\":{\"\xfe\":1}}", path: "p.\uFFFD", problem: msgUTF8},
		{desc: "second element", doc: `{"a":[{"b":"ok"},{"b":"\udfff"}]}`, path: "a[1].b", problem: msgSurrogate},
		{desc: "top-level string", doc: `"\u0000"`, path: "", problem: msgNUL},
		{desc: "long bad key cut", doc: `{"p":{"` + strings.Repeat("k", 200) + `\u0000":1}}`, path: "p." + strings.Repeat("k", MaxPropertyKey) + "...", problem: msgNUL},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			path, problem, ok := JSON([]byte(tt.doc))
			if ok != (tt.problem == "") || path != tt.path || problem != tt.problem {
				t.Fatalf("got %q %q %v, want %q %q", path, problem, ok, tt.path, tt.problem)
			}
		})
	}
}

// FuzzJSON: the scanner never panics; on valid JSON, a document it passes
// decodes (with Go's decoder) to strings and keys that are storable text
// and that Go did not repair (a U+FFFD not in the document stands for
// invalid UTF-8 or a lone surrogate escape); and on a document that is one
// string without escapes it agrees with Text.
//
//	go test -run '^$' -fuzz FuzzJSON -fuzztime 5m ./internal/storable/
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, `[1,"\u0000"]`, "\"\xff\"", `{"a":{"b":[{}]}}`, `"\\u0000"`,
		`{"k\ud83d\ude00":["\uD83D\uDE00","\ufffd"]}`, "{\"a\":\"\xed\xa0\x80\"}", `{"a":"\ud800\u0041"}`, "\"a\x00b\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, problem, ok := JSON(doc)
		if !json.Valid(doc) {
			return
		}
		if !ok && problem == msgJSON {
			t.Fatalf("valid JSON %q reported as invalid", doc)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber() // 1e700 is valid JSON, not a float64
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, isString := v.(string); isString && !bytes.ContainsRune(doc, '\\') {
			d := bytes.TrimSpace(doc)
			if text := string(d[1 : len(d)-1]); ok != (Text(text) == "") {
				t.Fatalf("JSON(%q) ok=%v, Text=%q", doc, ok, Text(text))
			}
		}
		if !ok {
			return
		}
		repaired := !bytes.Contains(doc, []byte("\ufffd")) && !bytes.Contains(bytes.ToLower(doc), []byte(`\ufffd`))
		var walk func(v any)
		check := func(s string) {
			if p := Text(s); p != "" {
				t.Fatalf("JSON(%q) passed, but %q %s", doc, s, p)
			}
			if repaired && strings.ContainsRune(s, utf8.RuneError) {
				t.Fatalf("JSON(%q) passed, but Go decodes %q: repaired", doc, s)
			}
		}
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				check(v)
			case []any:
				for _, e := range v {
					walk(e)
				}
			case map[string]any:
				for k, e := range v {
					check(k)
					walk(e)
				}
			}
		}
		walk(v)
	})
}

func TestPropertyKeys(t *testing.T) {
	t.Parallel()
	many := map[string]int{}
	for i := range MaxProperties + 1 {
		many[strconv.Itoa(i)] = i
	}
	tests := []struct {
		desc     string
		props    map[string]int
		keys     []string
		problems []string // keys with a problem
		whole    bool
	}{
		{"sorted, fine", map[string]int{"b": 1, "a": 2}, []string{"a", "b"}, nil, false},
		{"empty key", map[string]int{"": 1, "a": 2}, []string{"", "a"}, []string{""}, false},
		{"long key", map[string]int{strings.Repeat("k", MaxPropertyKey+1): 1}, []string{strings.Repeat("k", MaxPropertyKey+1)}, []string{strings.Repeat("k", MaxPropertyKey+1)}, false},
		{"NUL in key", map[string]int{"a\x00": 1}, []string{"a\x00"}, []string{"a\x00"}, false},
		{"too many", many, nil, nil, true},
	}
	for _, tt := range tests {
		keys, problems, whole := propertyKeys(tt.props)
		if tt.keys != nil && !slices.Equal(keys, tt.keys) {
			t.Errorf("%s: keys %q, want %q", tt.desc, keys, tt.keys)
		}
		if len(problems) != len(tt.problems) {
			t.Errorf("%s: problems %v, want keys %q", tt.desc, problems, tt.problems)
		}
		for _, k := range tt.problems {
			if problems[k] == "" {
				t.Errorf("%s: no problem for %q", tt.desc, k)
			}
		}
		if (whole != "") != tt.whole {
			t.Errorf("%s: whole %q, want problem %v", tt.desc, whole, tt.whole)
		}
	}
}

func TestProperties(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range MaxProperties + 1 {
		many[strconv.Itoa(i)] = "v"
	}
	long := strings.Repeat("k", MaxPropertyKey+1)
	tests := []struct {
		desc   string
		props  map[string]string
		judged []string // keys whose value was judged, in order
		want   []string // "field: problem"
	}{
		{desc: "fine", props: map[string]string{"b": "ok", "a": "ok"}, judged: []string{"a", "b"}},
		{desc: "bad value", props: map[string]string{"a": "bad", "b": "ok"}, judged: []string{"a", "b"},
			want: []string{"properties.a: is bad"}},
		{desc: "bad key: value not judged", props: map[string]string{"": "bad", "a": "ok"}, judged: []string{"a"},
			want: []string{"properties.: keys must be 1-128 characters"}},
		{desc: "long key cut in the field", props: map[string]string{long: "ok"},
			want: []string{"properties." + long[:MaxPropertyKey] + "...: keys must be 1-128 characters"}},
		{desc: "too many", props: many, judged: slices.Sorted(maps.Keys(many)),
			want: []string{"properties: at most 200 properties"}},
	}
	for _, tt := range tests {
		var judged, got []string
		Properties(tt.props, func(k, v string) string {
			judged = append(judged, k)
			if v == "bad" {
				return "is bad"
			}
			return ""
		}, func(field, problem string) { got = append(got, field+": "+problem) })
		if !slices.Equal(judged, tt.judged) {
			t.Errorf("%s: judged %q, want %q", tt.desc, judged, tt.judged)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: problems %q, want %q", tt.desc, got, tt.want)
		}
	}
}

func TestKeyField(t *testing.T) {
	t.Parallel()
	longest := strings.Repeat("é", MaxPropertyKey)
	for _, tt := range []struct{ key, want string }{
		{"plan", "properties.plan"},
		{"", "properties."},
		{longest, "properties." + longest},
		{longest + "x" + strings.Repeat("k", 1<<20), "properties." + longest + "..."},
	} {
		if got := KeyField("properties", tt.key); got != tt.want {
			t.Errorf("KeyField(%.20q...) = %.40q..., want %.40q...", tt.key, got, tt.want)
		}
	}
}
