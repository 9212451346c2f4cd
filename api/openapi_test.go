package api

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
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
}

// The document in docs/openapi.json is the one the service serves (make
// generate writes it: go test ./api -run TestOpenAPIFile -update); the
// client in internal/apiclient is generated from that file.
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
