package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"tidings/internal/broadcasts"
	"tidings/internal/outbound"
	"tidings/internal/page"
)

// What makes the document teach rather than list: servers, described
// tags, a description for every operation, the bounds and formats the
// validators enforce (struct tags on the request types, read by fields),
// per-operation request schemas where a create and an update share a Go
// type, and examples recorded from the real service by
// TestOpenAPIExamples (api/openapi_examples.json, embedded here so the
// served document carries them). docs/decisions.md "The OpenAPI document".

// servers names where the API answers. The document is served by the api
// itself, so the one server is a variable whose default is make run's.
var servers = openapi3.Servers{{
	URL:         "{origin}",
	Description: "The Tidings api you run (make run listens on http://localhost:8080; set origin to your PUBLIC_BASE_URL).",
	Variables: map[string]*openapi3.ServerVariable{"origin": {Default: "http://localhost:8080",
		Description: "Scheme, host and port of the api, without a trailing slash."}},
}}

// tagDocs describes each tag (an operation's first path segment under
// /api, see tagOf). A route under a new segment needs its line here:
// Document fails naming the tag otherwise.
var tagDocs = map[string]string{
	"service":      "The service itself: health, readiness, Prometheus metrics, this document and its reference page, and SendGrid's event webhook. No credential.",
	"tracking":     "Links inside the emails: the open pixel, tracked clicks and the unsubscribe and preference page. The signed token in the path is the credential.",
	"tenant":       "The tenant (one organisation): its settings, sending status and sandbox whitelist. POST /api/tenant provisions it from a dashboard session.",
	"api-keys":     "API keys of the tenant. Creating and revoking one takes a dashboard session, so that a leaked key cannot mint others; the raw key is shown once.",
	"contacts":     "The audience: contacts keyed by email, their custom properties, topics and derived counters, bulk imports, and each contact's history.",
	"send":         "Transactional sends: one message, or a batch of up to 100, rendered from a template and handed to the provider within the request.",
	"sends":        "Send history: every message's record and what became of it (delivered, opened, clicked, bounced, complained).",
	"events":       "Custom events about contacts (they may enrol contacts in sequences), the tenant-wide feed, and the archive of months past the retention.",
	"sequences":    "Drip sequences written as YAML: a trigger event, sends and delays. Enrolments, dry runs and per-sequence sends.",
	"scheduled":    "The steps sequences have scheduled and not yet sent.",
	"templates":    "Email templates: MJML (or HTML) with Liquid variables, versioned on every save, with locale versions and previews.",
	"partials":     "Layouts and includes shared by templates.",
	"segments":     "Rule-based groups of contacts, computed on demand.",
	"campaigns":    "Campaigns group sequences and templates towards goals.",
	"broadcasts":   "One-off sends of a template to a segment, now or at a set time, with pause, resume and cancel.",
	"suppressions": "Addresses no email goes to (hard bounces, complaints and manual entries).",
	"topics":       "Subscription topics contacts may opt in to or out of on the preference page.",
	"audit-log":    "Who changed what: one entry per successful write under /api.",
	"webhooks":     "Outbound webhooks: endpoints the service posts delivery outcomes and other events to, signed (Standard Webhooks), with delivery history and retries.",
	"domains":      "Sending domains: the DNS records to publish, their verification, and whether mail may be sent from each.",
	"metrics":      "Engagement counters per month or day, for the tenant, each sequence and each template.",
	"experiments":  "A/B experiments on sends.",
	"providers":    "The email providers the tenant sends through.",
}

// usedTags lists the tags the operations use, each described.
func usedTags(doc *openapi3.T) (openapi3.Tags, error) {
	seen := map[string]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, t := range op.Tags {
				seen[t] = true
			}
		}
	}
	var tags openapi3.Tags
	for t := range seen {
		d := tagDocs[t]
		if d == "" {
			return nil, fmt.Errorf("tag %q has no description in tagDocs (api/openapi_teach.go)", t)
		}
		tags = append(tags, &openapi3.Tag{Name: t, Description: d})
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].Name < tags[j].Name })
	return tags, nil
}

// describeOperation is an operation's own description (desc, else its
// summary) followed by what holds for it by its place in the table: who
// may call it, how it pages, what an update needs.
func describeOperation(key, fiberPath string, params []string, o op) string {
	method, _, _ := strings.Cut(key, " ")
	var b strings.Builder
	switch {
	case o.desc != "":
		b.WriteString(o.desc)
	case opDescs[key] != "":
		b.WriteString(opDescs[key])
	default:
		b.WriteString(o.summary + ".")
	}
	note := func(s string) { b.WriteString("\n\n" + s) }
	qs := queryParams[key]
	switch {
	case slices.Contains(qs, "cursor"):
		note(fmt.Sprintf("Paged: up to `limit` items (default %d, at most %d), newest first unless said otherwise; pass the answer's `nextCursor` as `cursor` for the next page (null on the last).",
			page.DefaultLimit, limitMax(key)))
	case method == http.MethodGet && o.res != nil && isItems(o.res):
		note("Answered whole, without paging.")
	}
	if o.atLeastOne {
		note("Send only the fields to change; at least one. A field left out keeps its value.")
	}
	if len(o.required) > 0 {
		note("Required: " + strings.Join(o.required, ", ") + ".")
	}
	for _, p := range params {
		if strings.Contains(fiberPath, ":"+p) {
			note(fmt.Sprintf("An unknown `%s` in this tenant is 404 (another tenant's is unknown too).", p))
			break
		}
	}
	switch {
	case o.auth == authSession:
		note("Takes a dashboard session (a bearer JWT from the identity provider); an API key is 403 FORBIDDEN.")
	case o.auth == authKey && strings.HasPrefix(fiberPath, "/api/"):
		note("Takes an API key or a dashboard session as `Authorization: Bearer`.")
	}
	return b.String()
}

func isItems(v any) bool {
	return strings.HasSuffix(componentName(reflect.TypeOf(v)), "Items")
}

// pathParamDoc describes a path parameter by its name.
func pathParamDoc(fiberPath, p string) string {
	switch p {
	case "email":
		return "The email address, URL-encoded."
	case "domain":
		return "The domain name (example.com)."
	case "token":
		return "The signed token the email carried."
	case "locale":
		return "A BCP 47 language tag (de, de-AT, pt-BR)."
	case "month":
		return "The archived month, YYYY-MM."
	case "file":
		return "A file name the reference page gives."
	case "messageId":
		return "The webhook message's id (a delivery's messageId)."
	case "keyId":
		return "The API key's keyId."
	case "sendId":
		return "The send's sendId."
	case "contactId":
		return "The contact's contactId."
	case "campaignId":
		return "The campaign's campaignId."
	case "ref":
		return "The id of the sequence or template to add or remove."
	}
	rest := strings.TrimPrefix(fiberPath, "/api/")
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "sequences", "templates", "partials":
		return "The caller-chosen id: letters, digits, '_', '.', '-', at most 64."
	}
	return "The " + strings.TrimSuffix(first, "s") + "'s id."
}

// idPattern is a caller-chosen id (ids.Pattern).
const idPattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`

// pathParamSchema is a path parameter's schema: a caller-chosen id is
// refused outside idPattern when it is created (PUT); elsewhere an id
// that could not exist is simply not found.
func pathParamSchema(method, fiberPath, p string) *openapi3.Schema {
	s := openapi3.NewStringSchema()
	switch {
	case method == http.MethodPut && p == "id":
		s.Pattern = idPattern
	case p == "month":
		s.Pattern = `^[0-9]{4}-(0[1-9]|1[0-2])$`
	}
	return s
}

// limitMax is the largest limit a route takes.
func limitMax(key string) int {
	switch key {
	case "GET /api/segments/:id/members", "GET /api/broadcasts/:id/recipients":
		return 1000
	}
	return page.MaxLimit
}

var (
	dateTime  = "date-time"
	statusSet = map[string][]string{
		"GET /api/contacts/:id/sends":        {"sent", "delivered", "bounced", "complained", "rejected"},
		"GET /api/sends":                     {"sent", "delivered", "bounced", "complained", "rejected"},
		"GET /api/campaigns":                 {"draft", "active", "paused", "completed", "archived"},
		"GET /api/scheduled":                 {"pending", "claimed", "sent", "cancelled", "failed", "dead"},
		"GET /api/broadcasts":                broadcasts.Statuses,
		"GET /api/webhooks/:id/deliveries":   outbound.DeliveryStatuses,
		"GET /api/broadcasts/:id/recipients": broadcasts.RecipientStatuses,
	}
)

// querySchema is the schema of query parameter q of route key, and whether
// the route requires it.
func querySchema(key, q string) (*openapi3.Schema, bool) {
	s := openapi3.NewStringSchema()
	switch q {
	case "limit":
		s = openapi3.NewIntegerSchema().WithMin(1).WithMax(float64(limitMax(key)))
	case "from", "to", "since", "scheduledFor":
		s.Format = dateTime
	case "inDoubt":
		s = openapi3.NewBoolSchema()
	case "yearMonth":
		s.Pattern = `^[0-9]{4}-(0[1-9]|1[0-2])$`
	case "date", "startDate", "endDate":
		s.Format = "date"
	case "period":
		s.Enum = []any{"monthly", "daily"}
	case "reason":
		s.Enum = []any{"hard_bounce", "complaint", "manual"}
	case "email":
		s.Format = "email"
	case "actor", "action", "resourceType":
		s.MaxLength = openapi3.Ptr(uint64(256))
	case "status":
		for _, v := range statusSet[key] {
			s.Enum = append(s.Enum, v)
		}
	}
	return s, key == "GET /api/scheduled/:id" && q == "scheduledFor"
}

// request is the schema of o's JSON body: the type's own component, or a
// component of the operation's own (reqName) when its rules differ from
// another operation's on the same type.
func (g *schemaGen) request(o op) (*openapi3.SchemaRef, error) {
	t := reflect.TypeOf(o.req)
	if o.reqName == "" {
		if len(o.required) > 0 || o.atLeastOne || len(o.omit) > 0 {
			return nil, fmt.Errorf("required, atLeastOne or omit needs a reqName")
		}
		return g.ref(t)
	}
	name := o.reqName
	if existing, ok := g.schemas[name]; ok {
		return openapi3.NewSchemaRef("#/components/schemas/"+name, existing.Value), nil
	}
	s := g.objectSchema()
	g.schemas[name] = s.NewRef()
	if err := g.fields(t, s, true); err != nil {
		return nil, err
	}
	s.Required = nil
	for _, f := range o.omit {
		if _, ok := s.Properties[f]; !ok {
			return nil, fmt.Errorf("omitted field %q is not a field of %s", f, t)
		}
		delete(s.Properties, f)
	}
	for _, r := range o.required {
		if _, ok := s.Properties[r]; !ok {
			return nil, fmt.Errorf("required field %q is not a field of %s", r, t)
		}
		s.Required = append(s.Required, r)
	}
	sort.Strings(s.Required)
	if o.atLeastOne {
		s.MinProps = 1
	}
	return openapi3.NewSchemaRef("#/components/schemas/"+name, s), nil
}

// constrain applies a field's schema tags to its schema: enum:"a,b",
// format:"email" (format:"-" for none), min:"1" and max:"64" (a string's
// length, a number's value or an array's items), pattern:"^...$". A
// string field named like a time (createdAt, timestamp) is a date-time
// unless it says otherwise.
func constrain(r *openapi3.SchemaRef, tag reflect.StructTag, name string) (*openapi3.SchemaRef, error) {
	if r.Ref != "" || r.Value == nil {
		if tag.Get("enum")+tag.Get("format")+tag.Get("min")+tag.Get("max")+tag.Get("pattern")+tag.Get("values") != "" {
			return nil, fmt.Errorf("%s: constraints on a component reference", name)
		}
		return r, nil
	}
	s := *r.Value
	is := func(typ string) bool { return s.Type != nil && s.Type.Includes(typ) }
	format := tag.Get("format")
	if format == "" && is("string") && (strings.HasSuffix(name, "At") || name == "at" || name == "timestamp" || name == "scheduledFor") {
		format = dateTime
	}
	if format != "" && format != "-" {
		s.Format = format
	}
	if e := tag.Get("enum"); e != "" {
		var enum []any
		for _, v := range strings.Split(e, ",") {
			enum = append(enum, v)
		}
		switch {
		case is("array") && s.Items != nil && s.Items.Value != nil:
			items := *s.Items.Value
			items.Enum = enum
			s.Items = items.NewRef()
		case is("null"):
			s.Enum = append(enum, nil)
		default:
			s.Enum = enum
		}
	}
	if v := tag.Get("values"); v != "" {
		if !is("object") {
			return nil, fmt.Errorf("%s: values on a schema that is not an object", name)
		}
		s.AdditionalProperties = openapi3.AdditionalProperties{Schema: openapi3.NewSchemaRef("#/components/schemas/"+v, nil)}
	}
	if p := tag.Get("pattern"); p != "" {
		s.Pattern = p
	}
	for _, bound := range []string{"min", "max"} {
		v := tag.Get(bound)
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s:%q", name, bound, v)
		}
		switch {
		case is("string") && bound == "min":
			s.MinLength = n
		case is("string"):
			s.MaxLength = &n
		case (is("integer") || is("number")) && bound == "min":
			s.Min = openapi3.Ptr(float64(n))
		case is("integer") || is("number"):
			s.Max = openapi3.Ptr(float64(n))
		case is("array") && bound == "min":
			s.MinItems = n
		case is("array"):
			s.MaxItems = &n
		case is("object") && bound == "min":
			s.MinProps = n
		case is("object"):
			s.MaxProps = &n
		default:
			return nil, fmt.Errorf("%s: %s on a schema without a type", name, bound)
		}
	}
	return s.NewRef(), nil
}

func rateHeaders() openapi3.Headers {
	h := openapi3.Headers{}
	for _, name := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining"} {
		h[name] = &openapi3.HeaderRef{Ref: "#/components/headers/" + name}
	}
	return h
}

// errorResponses adds the errors the examples test saw this operation
// answer (401, 403 and 429 are shared components), each with its
// recorded examples.
func (g *schemaGen) errorResponses(key string, o op, out *openapi3.Operation) {
	recorded := g.examples[key].Responses
	for st, exs := range recorded {
		code, _ := strconv.Atoi(st)
		if code < 400 || st == "401" || st == "429" || (st == "403" && o.auth == authSession) {
			continue
		}
		var codes []string
		for _, ex := range exs {
			if c := ex.code(); c != "" && !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
		errRef := openapi3.NewSchemaRef("#/components/schemas/ErrorBody", nil)
		content := openapi3.NewContentWithJSONSchemaRef(errRef)
		desc := http.StatusText(code) + ": " + strings.Join(codes, ", ") + "."
		r := &openapi3.Response{Description: &desc, Content: withExamples(content, exs), Headers: rateHeaders()}
		out.Responses.Set(st, &openapi3.ResponseRef{Value: r})
	}
}

// withExamples is content (one JSON media type) with the recorded
// examples; content itself is shared between statuses and not changed.
func withExamples(content openapi3.Content, exs []recorded) openapi3.Content {
	mt := content.Get("application/json")
	if mt == nil || len(exs) == 0 {
		return content
	}
	copied := *mt
	copied.Examples = openapi3.Examples{}
	for i, ex := range exs {
		name := ex.Name
		if name == "" {
			name = "example" + strconv.Itoa(i+1)
		}
		copied.Examples[name] = &openapi3.ExampleRef{Value: &openapi3.Example{Summary: ex.Summary, Value: ex.Body}}
	}
	return openapi3.Content{"application/json": &copied}
}

// exampleFile is api/openapi_examples.json: by operation key ("METHOD
// /fiber/path", or "shared" for the 401, 403 and 429 every operation
// shares), the request body of a success and the responses by status.
type exampleFile map[string]opExamples

type opExamples struct {
	Request   any                   `json:"request,omitempty"`
	Responses map[string][]recorded `json:"responses"`
}

// recorded is one response the examples test saw.
type recorded struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	Body    any    `json:"body"`
}

// code is the error code of an error envelope.
func (r recorded) code() string {
	m, _ := r.Body.(map[string]any)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

//go:embed openapi_examples.json
var examplesJSON []byte

func loadExamples() (exampleFile, error) {
	var f exampleFile
	if err := json.Unmarshal(examplesJSON, &f); err != nil {
		return nil, fmt.Errorf("api/openapi_examples.json: %w", err)
	}
	return f, nil
}

// valueSchemas are the components that values:"Name" tags name: what a
// property of a contact or an event may hold.
func valueSchemas() openapi3.Schemas {
	scalar := func() openapi3.SchemaRefs {
		return openapi3.SchemaRefs{
			{Value: openapi3.NewStringSchema().WithMaxLength(4096)},
			{Value: openapi3.NewFloat64Schema()},
			{Value: openapi3.NewBoolSchema()},
		}
	}
	contact := scalar()
	contact = append(contact,
		&openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"array"}, MaxItems: openapi3.Ptr(uint64(100)),
			Items: &openapi3.SchemaRef{Value: &openapi3.Schema{AnyOf: scalar()}}}},
		&openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"null"}}})
	return openapi3.Schemas{
		"PropertyValue": {Value: &openapi3.Schema{AnyOf: contact,
			Description: "A string (at most 4096 bytes), number, boolean, or an array of up to 100 of those; null removes the property. No nested objects."}},
		"EventPropertyValue": {Value: &openapi3.Schema{AnyOf: scalar(),
			Description: "A string (at most 4096 bytes), number or boolean."}},
	}
}

// opDescs describe the operations whose entry in the table has no desc,
// kept here so that the table's lines stay as other branches know them.
var opDescs = map[string]string{
	"GET /api/tenant": "The tenant of the credential: its plan, sending status (a new tenant is in the sandbox: mail goes only to " +
		"the whitelist), counters of contacts and sends this month, and its settings.",
	"PATCH /api/tenant": "Settings: name, defaultFromAddress (on a verified domain), timezone (IANA), eventRetentionDays, " +
		"frequencyCap ({max, period} or null) and sendingStatus. Setting sendingStatus to enabled leaves the sandbox; it needs " +
		"a connected email provider and at least one verified domain.",
	"POST /api/tenant/sandbox-whitelist": "While the tenant is in the sandbox, mail goes only to these addresses (at most 50). " +
		"Answers the whole list.",
	"POST /api/api-keys": "The answer's rawKey is the key itself, shown this once; store it. A tenant holds at most 10 active keys. " +
		"Keys do not expire; revoke one with DELETE.",
	"GET /api/api-keys":           "Every key of the tenant with its keyPrefix and status; never the key itself.",
	"DELETE /api/api-keys/:keyId": "The key stops working at once on every instance: its next request is 401.",
	"GET /api/contacts/:id":       "The contact with its properties, topics and derived counters (sends, opens, clicks, last event).",
	"DELETE /api/contacts/:id":    "Deletes the contact with its enrolments; its pending scheduled sends are cancelled.",
	"GET /api/contacts/stats":     "Counts of the tenant's contacts: total, suppressed, added in the last 24 hours and 7 days.",
	"POST /api/events": "Records an event about an existing contact (by email; an event never creates a contact). Every enabled " +
		"sequence whose trigger.event is the name enrols the contact (triggeredSequences). With updateContact (the default) the " +
		"contact's derived fields are updated and the contact is in the answer.",
	"GET /api/sends/:sendId": "A send record: who, which template, the provider's message id, its delivery status and the " +
		"time of each outcome (delivered, opened, clicked, bounced, complained).",
	"GET /api/sends": "Every message sent by the tenant, newest first, filtered by status, contact, template, sequence, broadcast or time.",
	"POST /api/segments": "A segment is a rule tree over contacts' properties, derived counters and other segments. Created with " +
		"no members: compute it (POST .../compute) to fill them. A rule naming a segment that names this one is 422 CIRCULAR_DEPENDENCY.",
	"POST /api/segments/:id/compute": "Evaluates the rules against every contact of the tenant now and stores who is a member; " +
		"answers how many contacts were processed and how many changed.",
	"POST /api/campaigns": "A campaign groups sequences and templates towards goal events, aimed at a segment. It starts as draft; " +
		"PATCH its status to active, paused, completed or archived.",
	"PATCH /api/campaigns/:campaignId": "Name, description, status, segmentId (null clears it) and goals (replaces the list). " +
		"Sequences and templates are added and removed by their own routes.",
	"POST /api/broadcasts": "A draft that sends templateId to the members of segmentId. Send it with POST .../send, now or at sendAt.",
	"POST /api/broadcasts/:id/send": "Sends the broadcast now, or schedules it at sendAt (with localTime: that wall-clock time in " +
		"each contact's time zone).",
	"POST /api/domains": "Adds a sending domain in status pending and answers the DNS records to publish (DKIM CNAMEs and a " +
		"verification TXT). Publish them, then verify; the service also re-checks periodically.",
	"POST /api/domains/:domain/verify": "Looks the domain's DNS records up now and answers its status (verified once every " +
		"record is found) with a message naming what is still missing.",
	"PATCH /api/domains/:domain": "Enables or disables sending from the domain (sendingEnabled, required).",
	"POST /api/webhooks": "Registers an https endpoint for the event types listed (every type when absent). The answer's secret " +
		"signs every delivery (Standard Webhooks) and is shown this once.",
	"GET /api/sequences/:id": "The sequence with its YAML definition, parsed steps, trigger and version.",
	"POST /api/sequences/:id/contacts": "Enrols a contact now, as its trigger event would: 201 when enrolled, 200 when it " +
		"already was. A disabled sequence enrols no one.",
	"GET /api/templates/:id": "The template with its MJML source, the variables it reads and its current version.",
	"GET /api/metrics": "The tenant's counters (scheduled, sent, delivered, opened, clicked, bounced, complained...): for a month " +
		"(default: this one), a day (period=daily), or a range of days (startDate and endDate, at most 93 days). Rates are the " +
		"client's to compute (open rate: opened / delivered).",
}
