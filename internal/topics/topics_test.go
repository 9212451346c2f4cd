package topics_test

import (
	"context"
	"encoding/json"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/testenv"
	"tidings/internal/topics"
	"tidings/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Who a topic message goes to: the contact's own choice, else the topic's
// default.
func TestSubscribed(t *testing.T) {
	t.Parallel()
	optIn := queries.Topic{ID: "digest", DefaultMode: topics.OptIn}
	optOut := queries.Topic{ID: "news", DefaultMode: topics.OptOut}
	for _, tc := range []struct {
		choices string
		topic   queries.Topic
		want    bool
	}{
		{`{}`, optOut, true},                // opt_out: subscribed until they leave
		{`{}`, optIn, false},                // opt_in: only once they join
		{`{"news": false}`, optOut, false},  // left
		{`{"digest": true}`, optIn, true},   // joined
		{`{"digest": false}`, optIn, false}, // said no explicitly
		{`{"news": true}`, optOut, true},    // said yes explicitly
		{`{"other": false}`, optOut, true},  // another topic's choice does not count
		{``, optOut, true},                  // no choices at all
		{`{"digest": true}`, optOut, true},  // default applies to news
	} {
		if got := topics.Subscribed(json.RawMessage(tc.choices), tc.topic); got != tc.want {
			t.Errorf("%s, %s %s: %v, want %v", tc.choices, tc.topic.ID, tc.topic.DefaultMode, got, tc.want)
		}
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_t', 'T'), ('ten_o', 'O')`); err != nil {
		t.Fatal(err)
	}
	s := &topics.Store{DB: db}
	str := func(v string) *string { return &v }
	news, err := s.Create(ctx, "ten_t", topics.Input{ID: str("news"), Name: str(" News "), Default: str("opt_out")})
	if err != nil || news.Name != "News" || news.DefaultMode != "opt_out" {
		t.Fatalf("%+v %v", news, err)
	}
	for name, in := range map[string]topics.Input{
		"no id":       {Name: str("x"), Default: str("opt_in")},
		"bad id":      {ID: str("has space"), Name: str("x"), Default: str("opt_in")},
		"bad default": {ID: str("x"), Name: str("x"), Default: str("sometimes")},
		"no name":     {ID: str("x"), Default: str("opt_in")},
	} {
		if _, err := s.Create(ctx, "ten_t", in); !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := s.Create(ctx, "ten_t", topics.Input{ID: str("news"), Name: str("again"), Default: str("opt_in")}); !apperr.IsCode(err, "CONFLICT") {
		t.Fatalf("duplicate: %v", err)
	}
	// Another tenant has its own ids and sees nothing of these.
	if _, err := s.Create(ctx, "ten_o", topics.Input{ID: str("news"), Name: str("Theirs"), Default: str("opt_in")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ten_o", "news"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "ten_o", "nope", topics.Input{Name: str("x")}); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if u, err := s.Update(ctx, "ten_t", "news", topics.Input{Description: str("What ships")}); err != nil || u.Description != "What ships" || u.Name != "News" {
		t.Fatalf("%+v %v", u, err)
	}
	// A topic a template names cannot be deleted; once nothing names it,
	// it can.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html, topic)
		VALUES ('ten_t', 'weekly', 'W', 's', 'c', 'h', 'news')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "ten_t", "news"); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("delete in use: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE templates SET topic = NULL`); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "ten_t", "news"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "ten_t", "news"); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if _, err := s.Get(ctx, "ten_o", "news"); err != nil {
		t.Fatalf("the other tenant's topic went too: %v", err)
	}
	// A contact's choices name the tenant's topics only.
	q := queries.New(db.Pool)
	yes := true
	if _, err := topics.CheckChoices(ctx, q, "ten_t", map[string]*bool{"news": &yes}); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("a deleted topic accepted: %v", err)
	}
	if b, err := topics.CheckChoices(ctx, q, "ten_o", map[string]*bool{"news": &yes, "gone": nil}); err == nil {
		t.Fatalf("an unknown topic accepted: %s", b)
	}
}
