package apperr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidationReadsAsOneSentencePerField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc       string
		err        *Error
		wantMsg    string
		wantFields map[string][]string
	}{
		{desc: "one field", err: Invalid("email", "must be a valid email address"),
			wantMsg:    "invalid request: email must be a valid email address",
			wantFields: map[string][]string{"email": {"must be a valid email address"}}},
		{desc: "empty update", err: AtLeastOne("name", "enabled"),
			wantMsg:    "invalid request: body must contain at least one of name, enabled",
			wantFields: map[string][]string{"body": {"must contain at least one of name, enabled"}}},
		{desc: "first field by name", err: Validation(Fields{"b": {"is required"}, "a": {"must be short", "must be kind"}}),
			wantMsg:    "invalid request: a must be short",
			wantFields: map[string][]string{"a": {"must be short", "must be kind"}, "b": {"is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			e := tt.err
			if e.Kind != KindInvalid || e.Code != "VALIDATION_ERROR" || e.Message != tt.wantMsg {
				t.Fatalf("got %s %s %q", e.Kind, e.Code, e.Message)
			}
			fields := e.Details["fields"].(map[string]any)
			if len(fields) != len(tt.wantFields) {
				t.Fatalf("fields %v", fields)
			}
			for k, want := range tt.wantFields {
				if got := fmt.Sprint(fields[k]); got != fmt.Sprint(want) {
					t.Fatalf("fields[%s] = %s, want %v", k, got, want)
				}
			}
		})
	}
}

func TestFieldsErrIsNilWhenEmpty(t *testing.T) {
	t.Parallel()
	var f Fields
	f.Check(true, "name", "is required")
	if f.Err() != nil {
		t.Fatal("no message, no error")
	}
	f.Check(false, "name", "is required")
	if !IsCode(f.Err(), "VALIDATION_ERROR") {
		t.Fatalf("got %v", f.Err())
	}
}

func TestSpecific(t *testing.T) {
	t.Parallel()
	cause := errors.New("no rows in result set")
	generic := &Error{Kind: KindNotFound, Code: "NOT_FOUND", Message: "not found", Err: cause}
	specific := NotFound("CONTACT_NOT_FOUND", "contact")
	tests := []struct {
		desc     string
		err      error
		wantCode string
	}{
		{desc: "generic not found becomes specific", err: fmt.Errorf("wrapped: %w", generic), wantCode: "CONTACT_NOT_FOUND"},
		{desc: "another kind passes", err: Conflict("CONFLICT", "already exists"), wantCode: "CONFLICT"},
		{desc: "a plain error passes", err: cause},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got := Specific(tt.err, KindNotFound, specific)
			if tt.wantCode == "" {
				if got != tt.err {
					t.Fatalf("got %v", got)
				}
				return
			}
			if !IsCode(got, tt.wantCode) {
				t.Fatalf("got %v, want %s", got, tt.wantCode)
			}
		})
	}
	if Specific(nil, KindNotFound, specific) != nil {
		t.Fatal("nil must stay nil")
	}
	got := Specific(generic, KindNotFound, specific)
	if !errors.Is(got, cause) || specific.Err != nil {
		t.Fatal("the cause must be kept, and the specific error left unchanged")
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want Kind
	}{
		{Forbidden("no"), KindForbidden},
		{fmt.Errorf("x: %w", PlanLimit("contacts", 3)), KindPlanLimit},
		{RateLimited(0), KindRateLimited},
		{Unprocessable("CIRCULAR_DEPENDENCY", "cycle"), KindUnprocessable},
		{errors.New("boom"), KindInternal},
		{&Error{Code: "X"}, KindInternal},
	}
	for _, tt := range tests {
		if got := KindOf(tt.err); got != tt.want {
			t.Errorf("KindOf(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
	if e := RateLimited(0); e.RetryAfter != 1 {
		t.Fatalf("RetryAfter %d, want at least 1", e.RetryAfter)
	}
}

// A body full of mistakes gets a bounded answer.
func TestValidationDetailsAreBounded(t *testing.T) {
	t.Parallel()
	var f Fields
	for i := range 50_000 {
		f.Add(fmt.Sprintf("rules.conditions[%05d]", i), "required")
	}
	for range 10 {
		f.Add("rules.conditions[00000]", "again")
	}
	e := Validation(f)
	fields := e.Details["fields"].(map[string]any)
	if len(fields) != MaxFields || e.Details["omittedFields"] != 50_000-MaxFields {
		t.Fatalf("%d fields listed, omitted %v", len(fields), e.Details["omittedFields"])
	}
	if msgs := fields["rules.conditions[00000]"].([]string); len(msgs) != MaxMessages {
		t.Fatalf("%d messages", len(msgs))
	}
	if !strings.Contains(e.Message, "fields are invalid") {
		t.Fatalf("message %q does not say fields were left out", e.Message)
	}
	if small := Invalid("email", "is required"); small.Details["omittedFields"] != nil {
		t.Fatal("nothing omitted, nothing said")
	}
}
