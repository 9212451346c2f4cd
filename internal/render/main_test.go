package render

import (
	"os"
	"path/filepath"
	"testing"

	"tidings/internal/mjml"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func testPool(t testing.TB) *mjml.Pool { return testenv.MJML(t) }

// newsletterMJML is the 23 KB newsletter the mjml package benchmarks.
func newsletterMJML(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "mjml", "testdata", "newsletter.mjml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// newsletterVars are a recipient's bindings for the newsletter.
func newsletterVars() map[string]any {
	items := make([]any, 4)
	for i := range items {
		items[i] = map[string]any{
			"name":        []string{"Ridgeline 45 pack", "Cirrus shell", "Larch fleece", "Talus boots"}[i],
			"url":         "https://northwind.example/p/" + []string{"ridgeline-45", "cirrus", "larch", "talus"}[i],
			"imageUrl":    "https://cdn.northwind.example/p/" + []string{"ridgeline", "cirrus", "larch", "talus"}[i] + ".jpg",
			"description": "Field-tested by our guides through a wet October in the Cascades; light, tough and repairable for life.",
			"price":       []string{"189.00", "329.00", "119.00", "245.00"}[i],
			"onSale":      i%2 == 1,
		}
	}
	return Context{
		Variables: map[string]any{
			"items":    items,
			"resetUrl": "https://northwind.example/reset?token=abc123",
			"issue":    map[string]any{"title": "November dispatch", "slug": "nov-2026", "number": 42, "date": "November 2026"},
			"events": []any{
				map[string]any{"date": "Nov 28", "title": "Winter layering clinic", "url": "https://northwind.example/e/1", "store": "Seattle"},
				map[string]any{"date": "Dec 4", "title": "Ski touring night", "url": "https://northwind.example/e/2"},
			},
			"webVersionUrl": "https://northwind.example/web/nov",
		},
		Contact: &Contact{
			ContactID: "cnt_8f2k", Email: "ada@example.com", Subscribed: true,
			Properties: map[string]any{"firstName": "Ada", "tier": "trail", "memberSince": "2021-03-14", "homeStore": "Portland"},
		},
		UnsubscribeURL: "https://t.example/t/u/tok123",
	}.Bindings()
}
