package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gofiber/fiber/v2"

	"tidings/internal/contacts"
)

// The OpenAPI document (GET /api/openapi.json) is built from the app's own
// route table (fiber's GetRoutes: what is served is what is described), the
// operations table (api/openapi_ops.go: a summary and the Go request and
// response types of each route) and the query parameters each route
// reads (queryParams, the table that refuses unknown ones). Schemas come
// from the handlers' own request and response types by reflection, so a
// field added to a view is in the document at once. make test fails when
// a route has no operation, an operation has no route, the document does
// not validate, or a response the API tests see does not match its schema
// (docs/decisions.md "The OpenAPI document").

// auth is who may call an operation.
type access int

const (
	authKey     access = iota // an API key or a dashboard session (the default under /api)
	authSession               // a dashboard session only
	authNone                  // no credential (outside /api, or the document itself)
)

// op describes one route of the table.
type op struct {
	id      string // operationId (the generated client's method name)
	summary string
	desc    string
	auth    access
	// req is a zero value of the JSON request body's type (nil: none);
	// reqAlt adds other content types of the body (each a string).
	req    any
	reqAlt []string
	// res is a zero value of the success body's type (nil: no body), sent
	// with status (200 when 0); also lists other success statuses with the
	// same body. resType is the body's content type when not JSON (a
	// string then).
	res     any
	status  int
	also    []int
	resType string
	// reqName names this operation's own request schema when its Go type
	// is shared with another operation whose rules differ (a create and
	// an update of one type), and required lists the JSON fields this
	// operation requires beyond the type's required:"true" tags.
	reqName  string
	required []string
	// atLeastOne: the body must carry at least one field (an update).
	atLeastOne bool
	// omit lists the type's fields this operation refuses or ignores (an
	// update cannot change a contact's email).
	omit []string
	// bodyOptional: the body may be left out altogether.
	bodyOptional bool
}

// oneOf is an op's res when the route answers one of several bodies
// (by its query).
type oneOf []any

// listJSON is the page every cursor-paged list answers.
type listJSON[T any] struct {
	Items []T `json:"items"`
	// NextCursor continues the list; null on the last page.
	NextCursor *string `json:"nextCursor"`
}

// itemsJSON is a list answered whole, without paging.
type itemsJSON[T any] struct {
	Items []T `json:"items"`
}

func list[T any](items []T, next *string) listJSON[T] {
	return listJSON[T]{Items: items, NextCursor: next}
}

// queryDocs describes the query parameters shared by many routes; others
// are described per route in queryDocsByRoute.
var queryDocs = map[string]string{
	"cursor":       "Continues a list from the nextCursor of the page before.",
	"limit":        "Items per page.",
	"status":       "Only items of this status.",
	"from":         "Only items at or after this time (RFC 3339).",
	"to":           "Only items before this time (RFC 3339).",
	"contactId":    "Only items of this contact.",
	"templateId":   "Only sends of this template.",
	"sequenceId":   "Only sends of this sequence.",
	"broadcastId":  "Only sends of this broadcast.",
	"inDoubt":      "true: only sends whose provider call got no answer; false: only the others.",
	"name":         "Only events of this name.",
	"email":        "The contact with this email address.",
	"reason":       "Only entries of this reason (hard_bounce, complaint, manual).",
	"cancelReason": "Only cancelled sends of this reason.",
	"scheduledFor": "The scheduled time of the send (RFC 3339), to find a send of a partitioned table at once.",
	"period":       "monthly (the default) or daily; startDate and endDate without a period choose a range of days.",
	"yearMonth":    "The month (YYYY-MM); the current month when absent.",
	"date":         "The day (YYYY-MM-DD) of period=daily.",
	"startDate":    "The first day (YYYY-MM-DD) of a range.",
	"endDate":      "The last day (YYYY-MM-DD) of a range.",
	"actor":        "Only entries of this actor: an API key's keyId or a session's subject.",
	"action":       "Only entries of this action (<resourceType>.<verb>, e.g. contact.create).",
	"resourceType": "Only entries about this type of resource (contact, template, broadcast...).",
	"since":        "Only entries at or after this time (RFC 3339).",
	"format":       "csv or ndjson; without it, the Accept header chooses, else csv.",
}

// Document builds the OpenAPI document of app's routes. An error names a
// route without an operation or an operation without a route.
func Document(app *fiber.App) (*openapi3.T, error) {
	doc := &openapi3.T{
		OpenAPI: "3.1.0",
		Info: &openapi3.Info{Title: "Tidings API", Version: "1",
			Description: "Contacts, templates, sequences, segments, broadcasts and sending for each tenant. " +
				"Every answer under /api carries X-RateLimit-Limit and X-RateLimit-Remaining; " +
				"every error is the envelope {error: {code, message, details}}. POST, PUT and PATCH under /api take " +
				"an Idempotency-Key header."},
		Paths:      openapi3.NewPaths(),
		Components: &openapi3.Components{Schemas: openapi3.Schemas{}},
		Servers:    servers,
	}
	// No licence is named: the project publishes under none (redocly.yaml
	// waives info-license for that reason).
	doc.Info.Contact = &openapi3.Contact{Name: "The Tidings operators of this service"}
	examples, err := loadExamples()
	if err != nil {
		return nil, err
	}
	g := &schemaGen{schemas: doc.Components.Schemas, names: map[string]reflect.Type{}, examples: examples}
	addShared(doc, g)

	seen := map[string]bool{}
	var missing []string
	for _, r := range app.GetRoutes(true) {
		if r.Method == fiber.MethodHead || r.Method == fiber.MethodConnect || r.Method == fiber.MethodOptions || r.Method == fiber.MethodTrace {
			continue // fiber's own companions of each GET
		}
		key := r.Method + " " + r.Path
		if seen[key] {
			continue
		}
		seen[key] = true
		o, ok := operations[key]
		if !ok {
			missing = append(missing, key)
			continue
		}
		path, params := openAPIPath(r.Path)
		item := doc.Paths.Value(path)
		if item == nil {
			item = &openapi3.PathItem{}
			doc.Paths.Set(path, item)
		}
		operation, err := g.operation(key, r.Path, params, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		item.SetOperation(r.Method, operation)
	}
	for key := range operations {
		if !seen[key] {
			missing = append(missing, key+" (an operation without a route)")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the route table and the operations table differ: %s", strings.Join(missing, ", "))
	}
	tags, err := usedTags(doc)
	if err != nil {
		return nil, err
	}
	doc.Tags = tags
	// Built with references by name only; loading the JSON resolves them,
	// and what is validated is then exactly what is served.
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return openapi3.NewLoader().LoadFromData(body)
}

// openAPIPath turns fiber's "/api/contacts/:id" into "/api/contacts/{id}"
// and names its parameters.
func openAPIPath(p string) (string, []string) {
	parts := strings.Split(p, "/")
	var names []string
	for i, s := range parts {
		switch {
		case strings.HasPrefix(s, ":"):
			names = append(names, strings.TrimSuffix(s[1:], "?"))
			parts[i] = "{" + names[len(names)-1] + "}"
		case s == "*" || s == "+":
			names = append(names, "path")
			parts[i] = "{path}"
		}
	}
	return strings.Join(parts, "/"), names
}

func addShared(doc *openapi3.T, g *schemaGen) {
	c := doc.Components
	c.SecuritySchemes = openapi3.SecuritySchemes{
		"apiKey": {Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer",
			Description: "An API key of the tenant (POST /api/api-keys), as Authorization: Bearer <key>."}},
		"session": {Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "A dashboard session: a JWT from the identity provider naming the organisation."}},
	}
	integer := &openapi3.Schema{Type: &openapi3.Types{"integer"}}
	c.Headers = openapi3.Headers{
		"X-RateLimit-Limit": {Value: &openapi3.Header{Parameter: openapi3.Parameter{Required: true,
			Description: "Requests the tenant may make per minute.", Schema: integer.NewRef()}}},
		"X-RateLimit-Remaining": {Value: &openapi3.Header{Parameter: openapi3.Parameter{Required: true,
			Description: "Requests left of that budget.", Schema: integer.NewRef()}}},
		"Retry-After": {Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: "Seconds to wait before trying again.", Schema: integer.NewRef()}}},
	}
	c.Parameters = openapi3.ParametersMap{
		"IdempotencyKey": {Value: &openapi3.Parameter{Name: "Idempotency-Key", In: "header",
			Description: "1-255 printable ASCII characters, kept per credential (API key or dashboard user). A repeat " +
				"with the same key and body within 24 hours answers the first response without doing the work again, " +
				"with the header Idempotency-Replayed: true; the same key with another body is 422 " +
				"IDEMPOTENCY_KEY_REUSED; a repeat while the first runs is 409 IDEMPOTENCY_KEY_IN_USE. Failed first " +
				"attempts are not kept. A batch send names its records under the key as it writes them: a repeat " +
				"after its first request died answers each message from its record and sends nothing (NOT_SENT for " +
				"a message that never got one).",
			Schema: &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"string"}, MinLength: 1,
				MaxLength: openapi3.Ptr(uint64(255))}}}},
	}
	for name, v := range valueSchemas() {
		c.Schemas[name] = v
	}
	errRef, _ := g.ref(reflect.TypeFor[errorBody]())
	c.Responses = openapi3.ResponseBodies{
		"Error": {Value: &openapi3.Response{Description: openapi3.Ptr("An error, in the envelope every error uses."),
			Content: openapi3.NewContentWithJSONSchemaRef(errRef)}},
		"RateLimited": {Value: &openapi3.Response{Description: openapi3.Ptr("RATE_LIMITED: the tenant spent its budget; try again after Retry-After seconds."),
			Headers: openapi3.Headers{"Retry-After": {Ref: "#/components/headers/Retry-After"}},
			Content: withExamples(openapi3.NewContentWithJSONSchemaRef(errRef), g.examples["shared"].Responses["429"])}},
		"Unauthorized": {Value: &openapi3.Response{Description: openapi3.Ptr("UNAUTHORIZED: no credential, or one that is invalid, expired or revoked."),
			Content: withExamples(openapi3.NewContentWithJSONSchemaRef(errRef), g.examples["shared"].Responses["401"])}},
		"SessionOnly": {Value: &openapi3.Response{Description: openapi3.Ptr("FORBIDDEN: this operation takes a dashboard session, not an API key."),
			Content: withExamples(openapi3.NewContentWithJSONSchemaRef(errRef), g.examples["shared"].Responses["403"])}},
	}
}

func (g *schemaGen) operation(key, fiberPath string, params []string, o op) (*openapi3.Operation, error) {
	method, _, _ := strings.Cut(key, " ")
	underAPI := strings.HasPrefix(fiberPath, "/api/") && o.auth != authNone
	out := &openapi3.Operation{OperationID: o.id, Summary: o.summary, Description: describeOperation(key, fiberPath, params, o),
		Tags: []string{tagOf(fiberPath)}, Responses: openapi3.NewResponses()}
	if o.id == "" || o.summary == "" {
		return nil, fmt.Errorf("an operation needs an id and a summary")
	}
	for _, p := range params {
		out.Parameters = append(out.Parameters, &openapi3.ParameterRef{Value: openapi3.NewPathParameter(p).
			WithDescription(pathParamDoc(fiberPath, p)).WithSchema(pathParamSchema(method, fiberPath, p))})
	}
	for _, q := range queryParams[key] {
		d := queryDocs[q]
		if d == "" {
			return nil, fmt.Errorf("query parameter %q has no description in queryDocs", q)
		}
		s, required := querySchema(key, q)
		p := openapi3.NewQueryParameter(q).WithDescription(d).WithSchema(s)
		p.Required = required
		out.Parameters = append(out.Parameters, &openapi3.ParameterRef{Value: p})
	}
	if underAPI && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch) {
		out.Parameters = append(out.Parameters, &openapi3.ParameterRef{Ref: "#/components/parameters/IdempotencyKey"})
	}
	switch o.auth {
	case authKey:
		out.Security = &openapi3.SecurityRequirements{{"apiKey": {}}, {"session": {}}}
	case authSession:
		out.Security = &openapi3.SecurityRequirements{{"session": {}}}
	case authNone:
		out.Security = &openapi3.SecurityRequirements{}
	}

	if o.req != nil || len(o.reqAlt) > 0 {
		content := openapi3.Content{}
		if o.req != nil {
			ref, err := g.request(o)
			if err != nil {
				return nil, err
			}
			mt := openapi3.NewMediaType().WithSchemaRef(ref)
			if ex := g.examples[key].Request; ex != nil {
				mt.Examples = openapi3.Examples{"recorded": {Value: &openapi3.Example{
					Summary: "A request the examples test sent", Value: ex}}}
			}
			content["application/json"] = mt
		}
		for _, ct := range o.reqAlt {
			content[ct] = openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())
		}
		out.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(!o.bodyOptional).WithContent(content)}
	}

	status := o.status
	if status == 0 {
		status = http.StatusOK
	}
	var content openapi3.Content
	switch {
	case o.resType == fiber.MIMEApplicationJSON:
		content = openapi3.NewContentWithJSONSchema(openapi3.NewObjectSchema())
	case o.resType != "":
		content = openapi3.Content{o.resType: openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())}
	case reflect.TypeOf(o.res) == reflect.TypeFor[oneOf]():
		var refs openapi3.SchemaRefs
		for _, v := range o.res.(oneOf) {
			ref, err := g.ref(reflect.TypeOf(v))
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
		}
		content = openapi3.NewContentWithJSONSchema(&openapi3.Schema{OneOf: refs})
	case o.res != nil:
		ref, err := g.ref(reflect.TypeOf(o.res))
		if err != nil {
			return nil, err
		}
		content = openapi3.NewContentWithJSONSchemaRef(ref)
	}
	for _, st := range append([]int{status}, o.also...) {
		r := &openapi3.Response{Description: openapi3.Ptr(http.StatusText(st)), Content: withExamples(content, g.examples[key].Responses[strconv.Itoa(st)])}
		if underAPI {
			r.Headers = rateHeaders()
		}
		out.Responses.Set(strconv.Itoa(st), &openapi3.ResponseRef{Value: r})
	}
	if underAPI {
		g.errorResponses(key, o, out)
		out.Responses.Set("401", &openapi3.ResponseRef{Ref: "#/components/responses/Unauthorized"})
		if o.auth == authSession {
			out.Responses.Set("403", &openapi3.ResponseRef{Ref: "#/components/responses/SessionOnly"})
		}
		out.Responses.Set("429", &openapi3.ResponseRef{Ref: "#/components/responses/RateLimited"})
	}
	out.Responses.Set("default", &openapi3.ResponseRef{Ref: "#/components/responses/Error"})
	return out, nil
}

// tagOf groups operations by their first path segment under /api.
func tagOf(p string) string {
	rest, underAPI := strings.CutPrefix(p, "/api/")
	switch {
	case strings.HasPrefix(p, "/t/"):
		return "tracking"
	case !underAPI || rest == "openapi.json":
		return "service" // health, Prometheus, the docs page, SendGrid's webhook, this document
	}
	first, _, _ := strings.Cut(rest, "/")
	return first
}

// schemaGen turns Go types into component schemas by reflection.
type schemaGen struct {
	schemas openapi3.Schemas
	// names keeps which type holds each component name, so two types
	// never share one.
	names map[string]reflect.Type
	// examples are the recorded requests and responses
	// (api/openapi_examples.json).
	examples exampleFile
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	anyType        = reflect.TypeFor[any]()
)

// ref returns a schema for t: a reference to a component for our structs,
// inline for everything else.
func (g *schemaGen) ref(t reflect.Type) (*openapi3.SchemaRef, error) {
	if o, ok := optOf(t); ok {
		return g.ref(o)
	}
	switch {
	case t == rawMessageType || t == anyType:
		return &openapi3.SchemaRef{Value: &openapi3.Schema{Description: "Any JSON value."}}, nil
	case t.Kind() == reflect.Pointer:
		inner, err := g.ref(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(inner), nil
	}
	switch t.Kind() {
	case reflect.String:
		return openapi3.NewStringSchema().NewRef(), nil
	case reflect.Bool:
		return openapi3.NewBoolSchema().NewRef(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return openapi3.NewIntegerSchema().NewRef(), nil
	case reflect.Float32, reflect.Float64:
		return openapi3.NewFloat64Schema().NewRef(), nil
	case reflect.Slice:
		items, err := g.ref(t.Elem())
		if err != nil {
			return nil, err
		}
		return (&openapi3.Schema{Type: &openapi3.Types{"array"}, Items: items}).NewRef(), nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key of %s is not a string", t)
		}
		vals, err := g.ref(t.Elem())
		if err != nil {
			return nil, err
		}
		s := &openapi3.Schema{Type: &openapi3.Types{"object"}}
		if t.Elem() == anyType || t.Elem() == rawMessageType {
			s.AdditionalProperties = openapi3.AdditionalProperties{Has: openapi3.Ptr(true)}
		} else {
			s.AdditionalProperties = openapi3.AdditionalProperties{Schema: vals}
		}
		return s.NewRef(), nil
	case reflect.Struct:
		return g.component(t)
	}
	return nil, fmt.Errorf("no schema for %s", t)
}

// nullable lets a schema also be null (OpenAPI 3.1: a type list with
// "null", or anyOf null for a reference).
func nullable(r *openapi3.SchemaRef) *openapi3.SchemaRef {
	if r.Ref == "" && r.Value != nil && r.Value.Type != nil {
		s := *r.Value
		types := append(openapi3.Types{}, *s.Type...)
		if !slices.Contains(types, "null") {
			types = append(types, "null")
		}
		s.Type = &types
		return s.NewRef()
	}
	if r.Ref == "" && r.Value != nil && r.Value.Type == nil {
		return r // any JSON value already takes null
	}
	return (&openapi3.Schema{AnyOf: openapi3.SchemaRefs{r, {Value: &openapi3.Schema{Type: &openapi3.Types{"null"}}}}}).NewRef()
}

// optOf tells whether t is Opt[T] (a request field that may be absent,
// null or a value), and returns T.
func optOf(t reflect.Type) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.Name(), "Opt[") || t.PkgPath() != reflect.TypeFor[Opt[int]]().PkgPath() {
		return nil, false
	}
	f, ok := t.FieldByName("V")
	return f.Type, ok
}

// component adds struct t to the components once and refers to it.
func (g *schemaGen) component(t reflect.Type) (*openapi3.SchemaRef, error) {
	if t.Name() == "" {
		// An anonymous struct (a nested part of a view) stays inline.
		s := g.objectSchema()
		if err := g.fields(t, s, false); err != nil {
			return nil, err
		}
		sort.Strings(s.Required)
		return s.NewRef(), nil
	}
	name := componentName(t)
	if other, ok := g.names[name]; ok {
		if other != t {
			return nil, fmt.Errorf("types %s and %s would share the component name %s", other, t, name)
		}
		return openapi3.NewSchemaRef("#/components/schemas/"+name, g.schemas[name].Value), nil
	}
	g.names[name] = t
	s := g.objectSchema()
	g.schemas[name] = s.NewRef()
	request := strings.HasSuffix(name, "Request")
	if err := g.fields(t, s, request); err != nil {
		return nil, err
	}
	sort.Strings(s.Required)
	return openapi3.NewSchemaRef("#/components/schemas/"+name, s), nil
}

// objectSchema is an object of named properties only: unknown request
// fields are refused, and a response holds only what its type names.
func (g *schemaGen) objectSchema() *openapi3.Schema {
	return &openapi3.Schema{Type: &openapi3.Types{"object"}, Properties: openapi3.Schemas{},
		AdditionalProperties: openapi3.AdditionalProperties{Has: openapi3.Ptr(false)}}
}

// fields adds t's JSON fields to s; embedded structs are flattened, as
// encoding/json does.
func (g *schemaGen) fields(t reflect.Type, s *openapi3.Schema, request bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if err := g.fields(f.Type, s, request); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitempty := strings.Contains(opts, "omitempty")
		ref, err := g.ref(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		if (omitempty || request) && f.Type.Kind() == reflect.Pointer {
			ref, _ = g.ref(f.Type.Elem()) // left out rather than null
		}
		if _, isOpt := optOf(f.Type); isOpt && f.Tag.Get("nullable") == "true" {
			ref = nullable(ref) // null clears the field
		}
		if ref, err = constrain(ref, f.Tag, name); err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		if d := f.Tag.Get("doc"); d != "" {
			ref = describe(ref, d)
		}
		s.Properties[name] = ref
		if request {
			if f.Tag.Get("required") == "true" {
				s.Required = append(s.Required, name)
			}
		} else if !omitempty {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// describe adds a description to a schema (beside a reference: 3.1 keeps
// a reference's sibling keywords).
func describe(r *openapi3.SchemaRef, d string) *openapi3.SchemaRef {
	if r.Ref != "" {
		return (&openapi3.Schema{AllOf: openapi3.SchemaRefs{r}, Description: d}).NewRef()
	}
	s := *r.Value
	s.Description = d
	return s.NewRef()
}

// componentNames name the request types that live in domain packages.
var componentNames = map[reflect.Type]string{
	reflect.TypeFor[contacts.Body](): "ContactRequest",
}

// componentName names a component after its Go type: contactJSON is
// Contact, contactReq ContactRequest, listJSON[contactJSON] ContactList.
func componentName(t reflect.Type) string {
	if n, ok := componentNames[t]; ok {
		return n
	}
	n := t.Name()
	if base, arg, ok := strings.Cut(n, "["); ok {
		arg = strings.TrimSuffix(arg, "]")
		if i := strings.LastIndex(arg, "."); i >= 0 {
			arg = arg[i+1:]
		}
		inner := plainName(arg)
		switch base {
		case "listJSON":
			return inner + "List"
		case "itemsJSON":
			return inner + "Items"
		}
		return plainName(base) + "Of" + inner
	}
	return plainName(n)
}

func plainName(n string) string {
	switch {
	case strings.HasSuffix(n, "JSON"):
		n = strings.TrimSuffix(n, "JSON")
	case strings.HasSuffix(n, "Req"):
		n = strings.TrimSuffix(n, "Req") + "Request"
	}
	r := []rune(n)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return string(r)
}

// openAPIDocument serves the document, built at the first request (the
// route table does not change after New; a test builds and validates it
// for every change).
func openAPIDocument(app *fiber.App) fiber.Handler {
	build := sync.OnceValues(func() ([]byte, error) {
		doc, err := Document(app)
		if err != nil {
			return nil, err
		}
		if err := doc.Validate(context.Background()); err != nil {
			return nil, err
		}
		return json.Marshal(doc)
	})
	return func(c *fiber.Ctx) error {
		body, err := build()
		if err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return c.Send(body)
	}
}

func whole[T any](items []T) itemsJSON[T] { return itemsJSON[T]{Items: items} }
