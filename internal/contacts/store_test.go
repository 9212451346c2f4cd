package contacts_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/page"
	"tidings/internal/testenv"
	"tidings/queries"
)

func TestListAndGetByEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`); err != nil {
		t.Fatal(err)
	}
	s := &contacts.Store{DB: db, FreeLimit: 100}
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
