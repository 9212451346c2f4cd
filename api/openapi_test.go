package api

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json")

// The document covers every route of the table and validates as OpenAPI
// 3.1 (kin-openapi); it is served without credentials.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := Document(b.app)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	r := b.expect("GET", "/api/openapi.json", "", nil, 200)
	loaded, err := openapi3.NewLoader().LoadFromData(r.raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("the served document does not validate: %v", err)
	}
	if loaded.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", loaded.OpenAPI)
	}
	send := loaded.Paths.Value("/api/send")
	if send == nil || send.Post == nil || send.Post.RequestBody == nil {
		t.Fatal("POST /api/send is not described")
	}
	if !strings.Contains(string(r.raw), `"#/components/schemas/SendRequest"`) {
		t.Fatal("POST /api/send's body is not the SendRequest schema")
	}
	// Every operation under /api answers at least one 4xx (Redocly's
	// operation-4xx-response is off only for the routes outside /api), and
	// has a description; every tag is described.
	for path, item := range loaded.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Description == "" {
				t.Errorf("%s %s has no description", method, path)
			}
			if !strings.HasPrefix(path, "/api/") || path == "/api/openapi.json" {
				continue
			}
			has4xx := false
			for st := range op.Responses.Map() {
				has4xx = has4xx || st[0] == '4'
			}
			if !has4xx {
				t.Errorf("%s %s answers no 4xx", method, path)
			}
		}
	}
	for _, tag := range loaded.Tags {
		if tag.Description == "" {
			t.Errorf("tag %s has no description", tag.Name)
		}
	}
	// Create and update of one resource differ: the create requires.
	create := loaded.Components.Schemas["ContactCreateRequest"].Value
	update := loaded.Components.Schemas["ContactUpdateRequest"].Value
	if !slices.Equal(create.Required, []string{"email"}) || len(update.Required) != 0 || update.MinProps != 1 ||
		update.Properties["email"] != nil {
		t.Errorf("contact create requires %v; update requires %v, minProperties %d", create.Required, update.Required, update.MinProps)
	}
}

// The document in docs/openapi.json is the one the service serves (make
// generate writes it: go test ./api -run TestOpenAPIFile -update); the
// clients in clients/go and clients/ts are generated from that file.
func TestOpenAPIFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.expect("GET", "/api/openapi.json", "", nil, 200)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, r.raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	const file = "../docs/openapi.json"
	if *update {
		if err := os.WriteFile(file, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil || !bytes.Equal(got, pretty.Bytes()) {
		t.Fatalf("docs/openapi.json is not the served document (%v): run make generate", err)
	}
}
