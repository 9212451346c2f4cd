package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

// TestOpenAPIExamples walks every operation of the table against the real
// service, as a new user would (a tenant, a key, a contact, a template, a
// send...), and after each success probes it with an unknown id and a bad
// body. What it sees is the document's examples: with -update it writes
// api/openapi_examples.json (keeping an example whose shape still holds,
// so ids do not churn); without, it fails when an answer's status or shape
// differs from the recorded one, or a recorded one was not seen. Since
// every example is also a response checkResponse validated against the
// schema, and every request one checkRequest validated, the examples can
// neither drift from the service nor from the schemas.
func TestOpenAPIExamples(t *testing.T) {
	t.Parallel()
	z := testenv.DNS(t)
	b := setup(t, func(c *config.Config) { c.DNSResolver, c.DKIMCNAMESuffix = z.Addr, testDKIMSuffix })
	rec := newExampleRecorder(t, b)
	b.record = rec.see
	walkExamples(t, b, rec)
	b.record = nil
	rec.shared(t)
	rec.finish(t)
}

// exampleRecorder keeps what the walk saw, by operation.
type exampleRecorder struct {
	b    *bundle
	seen exampleFile
	// byPath maps "METHOD /openapi/{path}" to the table's key.
	byPath map[string]string
	// probed: the operations already probed with a bad id and body.
	probed  map[string]bool
	probing bool
}

func newExampleRecorder(t *testing.T, b *bundle) *exampleRecorder {
	r := &exampleRecorder{b: b, seen: exampleFile{}, byPath: map[string]string{}, probed: map[string]bool{}}
	for key := range operations {
		method, p, _ := strings.Cut(key, " ")
		oa, _ := openAPIPath(p)
		r.byPath[method+" "+oa] = key
	}
	return r
}

// keyOf names the operation of a request.
func (r *exampleRecorder) keyOf(req *http.Request) (string, map[string]string) {
	router, err := documentRouter(r.b.app)
	if err != nil {
		r.b.t.Fatal(err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return "", nil
	}
	return r.byPath[req.Method+" "+route.Path], params
}

func (r *exampleRecorder) see(req *http.Request, sent []byte, res *http.Response, body []byte) {
	key, params := r.keyOf(req)
	if key == "" {
		return
	}
	if res.StatusCode < 300 && !r.probing && !r.probed[key] {
		r.probed[key] = true
		defer r.probe(key, req, params)
	}
	var v any
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &v) != nil {
		return
	}
	st := strconv.Itoa(res.StatusCode)
	ex := r.seen[key]
	if ex.Responses == nil {
		ex.Responses = map[string][]recorded{}
	}
	got := recorded{Body: v}
	switch {
	case res.StatusCode < 300:
		if len(ex.Responses[st]) > 0 {
			return // the first success of each status is the example
		}
		got.Name, got.Summary = "ok", fmt.Sprintf("%s %s", req.Method, req.URL.RequestURI())
		if ex.Request == nil && len(sent) > 0 {
			var body any
			if json.Unmarshal(sent, &body) == nil {
				ex.Request = body
			}
		}
	case res.StatusCode == 401 || res.StatusCode == 429 || (res.StatusCode == 403 && got.code() == "FORBIDDEN" && operations[key].auth == authSession):
		return // shared responses, recorded once by shared
	default:
		code := got.code()
		if code == "" || slices.ContainsFunc(ex.Responses[st], func(o recorded) bool { return o.code() == code }) {
			return
		}
		msg, _ := v.(map[string]any)["error"].(map[string]any)["message"].(string)
		got.Name, got.Summary = strings.ToLower(code), msg
	}
	ex.Responses[st] = append(ex.Responses[st], got)
	r.seen[key] = ex
}

// probe sends key's request again with every path id unknown, and with a
// body holding a field no request type has: the 404 and 400 each
// operation answers.
func (r *exampleRecorder) probe(key string, req *http.Request, params map[string]string) {
	r.probing = true
	defer func() { r.probing = false }()
	tok := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	o := operations[key]
	method, fiberPath, _ := strings.Cut(key, " ")
	if !strings.HasPrefix(fiberPath, "/api/") {
		return
	}
	if len(params) > 0 {
		parts := strings.Split(fiberPath, "/")
		for i, s := range parts {
			if name, ok := strings.CutPrefix(s, ":"); ok {
				switch name {
				case "email":
					parts[i] = url.PathEscape("nobody@example.com")
				case "domain":
					parts[i] = "unknown.example.com"
				case "locale":
					parts[i] = "fr"
				case "month":
					parts[i] = "2001-01"
				default:
					parts[i] = "unknown-" + name
				}
			}
		}
		var body any
		if o.req != nil {
			body = map[string]any{}
		}
		r.b.do(method, strings.Join(parts, "/")+queryOf(req), tok, body)
	}
	if o.req != nil {
		r.b.do(method, req.URL.RequestURI(), tok, map[string]any{"notAField": true})
	}
}

func queryOf(req *http.Request) string {
	if req.URL.RawQuery == "" {
		return ""
	}
	return "?" + req.URL.RawQuery
}

// shared records the answers every operation under /api shares: 401
// without a credential, 403 for an API key where a session is needed,
// 429 past the rate limit.
func (r *exampleRecorder) shared(t *testing.T) {
	ex := opExamples{Responses: map[string][]recorded{}}
	add := func(st int, res resp) {
		var v any
		if err := json.Unmarshal(res.raw, &v); err != nil || res.status != st {
			t.Fatalf("shared %d: %d %s", st, res.status, res.raw)
		}
		msg, _ := v.(map[string]any)["error"].(map[string]any)["message"].(string)
		rc := recorded{Body: v, Summary: msg}
		rc.Name = strings.ToLower(rc.code())
		ex.Responses[strconv.Itoa(st)] = []recorded{rc}
	}
	b := r.b
	add(401, b.do("GET", "/api/contacts", "", nil))
	key := b.apiKey(b.tenant("org_examples_shared"))
	add(403, b.do("POST", "/api/api-keys", key, map[string]any{"name": "from a key"}))
	limited := setup(t, func(c *config.Config) { c.RateLimitPerMinute = 3 })
	lkey := limited.apiKey(limited.tenant("org_examples_limited"))
	for range 10 {
		if res := limited.do("GET", "/api/contacts", lkey, nil); res.status == 429 {
			add(429, res)
			break
		}
	}
	if ex.Responses["429"] == nil {
		t.Fatal("the rate limit never answered 429")
	}
	r.seen["shared"] = ex
}

const examplesFile = "openapi_examples.json"

// finish compares what was seen with the recorded file (or writes it).
func (r *exampleRecorder) finish(t *testing.T) {
	old, err := loadExamples()
	if err != nil {
		t.Fatal(err)
	}
	merged := exampleFile{}
	var problems []string
	for key, ex := range r.seen {
		prev := old[key]
		m := opExamples{Request: ex.Request, Responses: map[string][]recorded{}}
		if prev.Request != nil && sameShape(prev.Request, ex.Request) {
			m.Request = prev.Request
		} else if !jsonEqual(prev.Request, ex.Request) {
			problems = append(problems, key+": the request example changed")
		}
		for st, list := range ex.Responses {
			for _, got := range list {
				i := slices.IndexFunc(prev.Responses[st], func(p recorded) bool { return p.Name == got.Name })
				if i >= 0 && sameShape(prev.Responses[st][i].Body, got.Body) {
					got = prev.Responses[st][i]
				} else {
					problems = append(problems, fmt.Sprintf("%s %s %s: not recorded, or its shape changed", key, st, got.Name))
				}
				m.Responses[st] = append(m.Responses[st], got)
			}
			sort.Slice(m.Responses[st], func(i, j int) bool { return m.Responses[st][i].Name < m.Responses[st][j].Name })
		}
		for st, list := range prev.Responses {
			for _, p := range list {
				if !slices.ContainsFunc(ex.Responses[st], func(g recorded) bool { return g.Name == p.Name }) {
					problems = append(problems, fmt.Sprintf("%s %s %s: recorded, no longer seen", key, st, p.Name))
				}
			}
		}
		merged[key] = m
	}
	for key := range old {
		if _, ok := r.seen[key]; !ok {
			problems = append(problems, key+": recorded, no longer seen")
		}
	}
	// Every JSON operation under /api has a success example and an error.
	for key, o := range operations {
		_, p, _ := strings.Cut(key, " ")
		if !strings.HasPrefix(p, "/api/") || o.auth == authNone {
			continue
		}
		ex := merged[key]
		hasOK, hasErr := false, false
		for st := range ex.Responses {
			hasOK = hasOK || st[0] == '2'
			hasErr = hasErr || st[0] == '4'
		}
		if o.res != nil && o.resType == "" && !hasOK {
			problems = append(problems, key+": the walk never saw it succeed (add a step to walkExamples)")
		}
		if !hasErr && o.req != nil {
			problems = append(problems, key+": no error example (the probes saw none)")
		}
	}
	sort.Strings(problems)
	if *update {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(merged); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(examplesFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if strings.Contains(p, "add a step") || strings.Contains(p, "no error example") {
				t.Error(p)
			}
		}
		return
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("the answers differ from api/openapi_examples.json: run make generate (go test ./api -run '^TestOpenAPI(Examples|File)$' -update)")
	}
}

// sameShape: the same JSON types, the same object keys at every depth;
// arrays compare their first items; null matches anything.
func sameShape(a, b any) bool {
	if a == nil || b == nil {
		return true
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameShape(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			return false
		}
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y)
		}
		return sameShape(x[0], y[0])
	default:
		return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
