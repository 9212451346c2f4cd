package contacts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/page"
	"tidings/internal/testenv"
	"tidings/queries"
)

// setup is a fresh database with the tenants ten_a and ten_b and a contacts
// store on it.
func setup(t *testing.T) (context.Context, *contacts.Store) {
	t.Helper()
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`); err != nil {
		t.Fatal(err)
	}
	return ctx, &contacts.Store{DB: db, FreeLimit: 100}
}

func TestListAndGetByEmail(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	var want []string
	for i := range 5 {
		c, err := s.Create(ctx, "ten_a", contacts.Input{Email: fmt.Sprintf("c%d@example.com", i)})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{c.ID}, want...) // newest first
	}
	if _, err := s.Create(ctx, "ten_b", contacts.Input{Email: "other@example.com"}); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 2, 5, 6} {
		var got []string
		for _, r := range testenv.Pages(t, limit, func(p page.Params) ([]queries.Contact, *page.Cursor, error) {
			return s.List(ctx, "ten_a", p)
		}) {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %v, want %v", limit, got, want)
		}
	}

	tests := []struct {
		desc, tenant, email, wantCode string
	}{
		{desc: "normalised", tenant: "ten_a", email: " C3@Example.COM "},
		{desc: "another tenant's", tenant: "ten_a", email: "other@example.com", wantCode: "CONTACT_NOT_FOUND"},
		{desc: "not an address", tenant: "ten_a", email: "nope", wantCode: "VALIDATION_ERROR"},
	}
	for _, tt := range tests {
		c, err := s.GetByEmail(ctx, tt.tenant, tt.email)
		if tt.wantCode == "" && (err != nil || c.Email != "c3@example.com") {
			t.Errorf("%s: %+v %v", tt.desc, c, err)
		}
		if tt.wantCode != "" && !apperr.IsCode(err, tt.wantCode) {
			t.Errorf("%s: got %v, want %s", tt.desc, err, tt.wantCode)
		}
	}
}

// Writes merge, each within the per-write limits; the database bounds the
// total, and the answer names properties.
func TestPropertiesTotalIsBounded(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	c, err := s.Create(ctx, "ten_a", contacts.Input{Email: "big@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("x", 4000)
	var last error
	for i := range 20 { // 20 writes of 4 KB each: 80 KB in total
		set := map[string]json.RawMessage{fmt.Sprintf("k%d", i): json.RawMessage(`"` + value + `"`)}
		_, last = s.Update(ctx, "ten_a", c.ID, contacts.Change{PropertiesSent: true, Properties: set})
		if last != nil {
			if i < 15 {
				t.Fatalf("write %d refused: %v", i, last)
			}
			break
		}
	}
	e, ok := apperr.As(last)
	if !ok || e.Code != "VALIDATION_ERROR" || e.Details["fields"].(map[string]any)["properties"] == nil {
		t.Fatalf("got %v, want VALIDATION_ERROR on properties", last)
	}
	_, _, err = s.Upsert(ctx, "ten_a", contacts.Input{Email: "big@example.com",
		Properties: contacts.Patch{Set: map[string]any{"more": value}}})
	if !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("upsert: %v", err)
	}
}

// A PATCH changes userId, properties and subscribed; it never changes the
// email, which identifies the contact, and must change something. Refused
// changes write nothing and name every field at fault.
func TestUpdateRules(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	c, err := s.Create(ctx, "ten_a", contacts.Input{Email: "ann@example.com", UserID: ptr("u1")})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("u", 257)
	tests := []struct {
		desc     string
		change   contacts.Change
		wantCode string
		fields   []string
	}{
		{desc: "nothing", change: contacts.Change{}, wantCode: "VALIDATION_ERROR", fields: []string{"body"}},
		{desc: "email alone", change: contacts.Change{EmailSent: true}, wantCode: "VALIDATION_ERROR", fields: []string{"email"}},
		{desc: "email with a valid change", change: contacts.Change{EmailSent: true, Subscribed: new(true)},
			wantCode: "VALIDATION_ERROR", fields: []string{"email"}},
		{desc: "email, long userId and a nested property",
			change: contacts.Change{EmailSent: true, UserIDSent: true, UserID: &long, PropertiesSent: true,
				Properties: map[string]json.RawMessage{"addr": json.RawMessage(`{"city":"x"}`)}},
			wantCode: "VALIDATION_ERROR", fields: []string{"email", "properties.addr", "userId"}},
		{desc: "another tenant's contact", change: contacts.Change{Subscribed: new(true)}, wantCode: "CONTACT_NOT_FOUND"},
		{desc: "userId cleared and a property set", change: contacts.Change{UserIDSent: true, PropertiesSent: true,
			Properties: map[string]json.RawMessage{"plan": json.RawMessage(`"pro"`)}}},
	}
	for _, tt := range tests {
		tenant := "ten_a"
		if tt.wantCode == "CONTACT_NOT_FOUND" {
			tenant = "ten_b"
		}
		got, err := s.Update(ctx, tenant, c.ID, tt.change)
		if tt.wantCode == "" {
			if err != nil || got.Email != "ann@example.com" || got.UserID != nil || string(got.Properties) != `{"plan": "pro"}` {
				t.Errorf("%s: %+v %v", tt.desc, got, err)
			}
			continue
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != tt.wantCode {
			t.Errorf("%s: got %v, want %s", tt.desc, err, tt.wantCode)
			continue
		}
		if tt.fields != nil {
			fields, _ := e.Details["fields"].(map[string]any)
			if names := slices.Sorted(maps.Keys(fields)); !slices.Equal(names, tt.fields) {
				t.Errorf("%s: fields %v, want %v", tt.desc, names, tt.fields)
			}
		}
		if after, _ := s.Get(ctx, "ten_a", c.ID); after.UserID == nil || *after.UserID != "u1" {
			t.Errorf("%s: a refused change was written: %+v", tt.desc, after)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Writers of contacts lock the contact before the tenant's row (the plan's
// counter), as an import chunk does: a create that meets an import's
// uncommitted insert of the same email waits for it and finds the contact,
// where taking the tenant's row first deadlocked with the chunk's
// reservation.
func TestCreateWaitsForAnImportChunk(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	chunk, err := s.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = chunk.Rollback(ctx) }()
	if _, err := chunk.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ('ten_a', 'cnt_imp', 'ann@example.com')`); err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, "ten_a", contacts.Input{Email: "ann@example.com"})
		created <- err
	}()
	// Once the create waits on the chunk's index entry, the chunk reserves.
	testenv.WaitForLockWait(t, s.DB, "the create never waited for the chunk")
	if _, err := chunk.Exec(ctx, `UPDATE tenants SET contact_count = contact_count + 1 WHERE id = 'ten_a'`); err != nil {
		t.Fatalf("the chunk's reservation: %v", err)
	}
	if err := chunk.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-created
	if e, ok := apperr.As(err); !ok || e.Code != "CONTACT_EXISTS" {
		t.Fatalf("create: %v, want CONTACT_EXISTS", err)
	}
	if st, _ := s.Stats(ctx, "ten_a"); st.Total != 1 {
		t.Fatalf("contact count %d, want 1", st.Total)
	}
}

// The contact list, newest first, reads contacts_created backwards (it is
// ascending since schema 0031, so that contacts created in id order
// append to it): an index range in the list's order, no sort. The
// statement is ContactList's (queries/contacts.sql).
func TestListReadsTheCreatedIndexBackwards(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	tx, err := s.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// A table this small would be read whole; the plan asked for is the
	// one a large tenant gets.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) SELECT * FROM contacts
		WHERE tenant_id = $1 AND (created_at, id) < ($2::timestamptz, $3::text)
		ORDER BY created_at DESC, id DESC LIMIT 50`, "ten_a", time.Now(), "~")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, l)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan Backward using contacts_created") || strings.Contains(text, "Sort") {
		t.Fatalf("the list's plan:\n%s\nwant a backward scan of contacts_created and no sort", text)
	}
}
