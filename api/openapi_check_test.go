package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/gofiber/fiber/v2"
)

// Every response the API tests see through bundle.do is checked against
// the document: its status is described and a JSON body matches its
// schema (also every error, against the envelope). A view that grows a
// field, or a handler that answers another shape, fails the test that saw
// it until the document says so.

var docRouter struct {
	once   sync.Once
	router routers.Router
	err    error
}

func documentRouter(app *fiber.App) (routers.Router, error) {
	docRouter.once.Do(func() {
		var doc *openapi3.T
		if doc, docRouter.err = Document(app); docRouter.err == nil {
			docRouter.router, docRouter.err = legacy.NewRouter(doc)
		}
	})
	return docRouter.router, docRouter.err
}

// checkResponse validates one response against the document; a request
// the document has no operation for (a test probing an unknown route or
// method) is not checked.
func checkResponse(t testing.TB, app *fiber.App, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	router, err := documentRouter(app)
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || len(body) == 0 {
		in.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s answered %d, which the OpenAPI document does not describe: %v\nbody: %.500s",
			req.Method, req.URL.Path, res.StatusCode, err, body)
	}
}

// looseWaivers are the refusals no schema can express, by the message's
// words (and the route, when given): the service refuses a request the
// document calls valid for a reason that needs the tenant's data, a
// parser, or another field (checkRequest). Each says why.
var looseWaivers = []struct{ route, words, why string }{
	{"", "is not a cursor issued by this service", "a cursor is opaque and signed; no schema tells a forged one"},
	{"", "is not a known query parameter", "OpenAPI cannot close the set of query parameters"},
	{"", "a tenant may hold at most 10 active API keys", "counts the tenant's keys"},
	{"", "must reach a public internet address", "resolves the host"},
	{"", "must use port 80, 443 or 1024-65535", "a URL's port is not a schema's"},
	{"", "must be a valid email address", "addresses are parsed (RFC 5322, IDNA); JSON Schema's email format is advisory"},
	{"", "must be an email address", "as above, with an optional display name"},
	{"", "is not a valid domain name", "domain names are parsed (IDNA, public suffix)"},
	{"", "as compact JSON", "a byte size of the stored JSON"},
	{"", "is still named by", "references held by other resources"},
	{"", "is not a topic of this tenant", "the tenant's data"},
	{"", "unknown segment ID", "the tenant's data"},
	{"", "must not contain NUL characters", "text hygiene: a JSON string admits NUL"},
	{"", "unpaired UTF-16 surrogate", "text hygiene: JSON admits lone surrogate escapes"},
	{"", "must be valid UTF-8 text", "text hygiene"},
	{"", "line ", "content and subjects are parsed as MJML and Liquid"},
	{"", "must be a BCP 47 language tag", "language tags are parsed"},
	{"", "lack what the template reads", "depends on the template"},
	{"", "uses partials that do not exist", "the tenant's data"},
	{"", "is disabled", "the template's state"},
	{"", "the contact is unsubscribed", "the contact's state"},
	{"", "the contact is suppressed", "the contact's state"},
	{"", "the tenant has no defaultFromAddress", "the tenant's settings"},
	{"", "must not be after", "compares two fields"},
	{"", "(or set localTime)", "sendAt's form depends on localTime"},
	{"", "is required with", "depends on another field"},
	{"", "is only used with", "depends on another field"},
	{"", "cannot be combined with", "depends on another field"},
	{"", "must be at most 93 days", "compares two fields"},
	{"", "or contactId is required", "one of two query parameters"},
	{"", "must be a custom event", "a name outside email.*: Go's regexp (kin-openapi) has no lookahead to say it"},
	{"", "digits", "numbers are stored exactly: their digits are counted as written"},
	{"", "unknown value", "the segment rule tree is described in prose; the rules parser checks its grammar"},
	{"", "requires at least one verified domain", "the tenant's domains"},
	{"", "requires a connected email provider", "the service's configuration"},
	{"", "cursor points outside", "a cursor is opaque"},
	{"", "unknown segment", "the tenant's data"},
	{"", "unknown template", "the tenant's data"},
	{"", "unknown sequence", "the tenant's data"},
	{"", "must be an IANA time zone name", "time zone names are looked up"},
	{"", "at most 5 minutes in the future", "compares with the clock"},
	{"", "stopped rendering", "rendering limits"},
	{"", "broadcast cannot", "the broadcast's state"},
	{"", "must not start with", "Go's regexp (kin-openapi) has no lookahead to say it"},
	{"", "must be 1-64 characters", "counted after trimming spaces"},
	{"", "the sandbox whitelist is full", "counts the tenant's whitelist"},
	{"", "must have at least two labels", "domain names are parsed"},
	{"", "not an IP address", "domain names are parsed"},
	{"", "has already been added", "the tenant's data"},
	{"", "bytes (512 KiB)", "a byte size; maxLength counts characters"},
	{"", "must contain a single JSON object", "the body after the first value"},
	{"", "is not live", "the named segment's state"},
	{"", "so it must stay live", "references held by sequences and live segments"},
	{"", "must be a variant of this broadcast", "the broadcast's data"},
	{"", "winner is picked already", "the broadcast's state"},
	{"", "must be between 0.05 and 0.5", "a fraction's bounds: the route table's min/max take integers"},
	{"PATCH /api/domains/{domain}", "", "warmup is decoded strictly by its handler (an object of enabled and schedule); the document describes it in prose"},
	{"GET /api/segments/{id}/explain", "is required", "contactId is a required query parameter the route table cannot mark"},
	{"GET /api/contacts/import/{id}/errors", "must be csv or ndjson", "a query parameter's enum the route table cannot state"},
	{"PUT /api/templates/{id}", "is required", "a create needs name, subject and content, an update none: one PUT does both"},
	{"PUT /api/templates/{id}", "can only be set on update", "as above"},
}

// waived tells whether a refusal of field f on route key is one of the
// looseWaivers.
func waived(key, field string, messages any) bool {
	list, _ := messages.([]any)
	for _, m := range list {
		msg, _ := m.(string)
		msg = field + " " + msg // as the error's message reads
		if !slices.ContainsFunc(looseWaivers, func(w struct{ route, words, why string }) bool {
			return (w.route == "" || w.route == key) && strings.Contains(msg, w.words)
		}) {
			return false
		}
	}
	return len(list) > 0
}

// checkRequest validates one request against the document, both ways: a
// request the service accepted (2xx) must be one the document calls
// valid (else the document refuses live requests, and a client generated
// from it cannot send them), and a request the document calls valid must
// not be refused for its fields (a 400 naming fields in details.fields:
// else the document is looser than the validators; looseWaivers lists the
// rules no schema can say).
func checkRequest(t testing.TB, app *fiber.App, req *http.Request, sent []byte, status int, body []byte) {
	t.Helper()
	router, err := documentRouter(app)
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(sent))
	route, params, err := router.FindRoute(r)
	if err != nil {
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	verr := openapi3filter.ValidateRequest(context.Background(), in)
	key := r.Method + " " + route.Path
	switch {
	case status/100 == 2 && verr != nil && key == "POST /api/send/batch":
		// A malformed message is answered as an error item in its place
		// (the batch is accepted); the document describes the messages a
		// client should send.
	case status/100 == 2 && verr != nil:
		t.Errorf("%s %s: the service accepted (%d) a request the OpenAPI document calls invalid: %v\nrequest: %.500s",
			r.Method, r.URL.Path, status, verr, sent)
	case status == http.StatusBadRequest && verr == nil:
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Details struct {
					Fields map[string]any `json:"fields"`
				} `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &env) != nil || len(env.Error.Details.Fields) == 0 {
			return
		}
		for f, msgs := range env.Error.Details.Fields {
			// The segment rule tree is described in prose; the rules
			// parser checks its grammar.
			if waived(key, f, msgs) || f == "rules" || strings.HasPrefix(f, "rules.") {
				continue
			}
			t.Errorf("%s %s: the OpenAPI document calls this request valid, the service refused field %q: %s\nrequest: %.500s",
				r.Method, r.URL.Path, f, body, sent)
		}
	}
}
