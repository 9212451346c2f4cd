// The files of examples/ (README.md there) stay valid against the
// service's own parsers, so an example never drifts from what the API
// accepts.
package docscheck

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"tidings/internal/rules"
	"tidings/internal/sequences/definition"
	"tidings/internal/templates"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestSequenceParses(t *testing.T) {
	b, err := os.ReadFile("../../examples/sequences/onboarding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse(b, definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Topic != "news" || d.Window == nil || d.Exit == nil || len(d.Steps) != 3 || len(d.Warnings) != 0 {
		t.Fatalf("%+v", d)
	}
}

func TestSegmentRulesParse(t *testing.T) {
	b, err := os.ReadFile("../../examples/segments/engaged-pro.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Parse(json.RawMessage(b), rules.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestTemplateCompiles(t *testing.T) {
	b, err := os.ReadFile("../../examples/templates/welcome.mjml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := templates.Prepare{MJML: testenv.MJML(t)}.Compile(context.Background(), "Welcome, {{ contact.firstName }}", string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RequiredVariables) == 0 || c.HTML == "" {
		t.Fatalf("%+v", c.RequiredVariables)
	}
}
