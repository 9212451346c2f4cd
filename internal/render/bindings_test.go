package render

import (
	"reflect"
	"testing"
	"time"
)

func TestContextBindings(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 21, 19, 13, 0, 250_000_000, time.FixedZone("CET", 3600))
	contact := &Contact{
		ContactID: "cnt_1", Email: "ada@example.com", UserID: "u1", Subscribed: true,
		Properties: map[string]any{"firstName": "Ada", "email": "other@example.com", "plan": "pro"},
	}
	wantContact := map[string]any{
		"contactId": "cnt_1", "email": "ada@example.com", "userId": "u1", "subscribed": true,
		"properties": map[string]any{"firstName": "Ada", "email": "other@example.com", "plan": "pro"},
		"firstName":  "Ada", "plan": "pro",
	}
	tests := []struct {
		desc string
		ctx  Context
		want map[string]any
	}{
		{
			desc: "variables, contact and unsubscribe link",
			ctx:  Context{Variables: map[string]any{"resetUrl": "https://r"}, Contact: contact, UnsubscribeURL: "https://u"},
			want: map[string]any{"resetUrl": "https://r", "contact": wantContact, "unsubscribeUrl": "https://u"},
		},
		{
			desc: "caller cannot override contact or unsubscribeUrl",
			ctx: Context{
				Variables: map[string]any{"contact": map[string]any{"email": "fake@example.com"}, "unsubscribeUrl": "https://evil", "x": 1},
				Contact:   contact, UnsubscribeURL: "https://u",
			},
			want: map[string]any{"x": 1, "contact": wantContact, "unsubscribeUrl": "https://u"},
		},
		{
			desc: "caller cannot pose as a contact even without one",
			ctx:  Context{Variables: map[string]any{"contact": "fake"}},
			want: map[string]any{"unsubscribeUrl": ""},
		},
		{
			desc: "event overrides a caller variable named event",
			ctx: Context{
				Variables: map[string]any{"event": "caller"},
				Event:     &Event{Name: "signup", Properties: map[string]any{"plan": "pro"}, Timestamp: ts},
			},
			want: map[string]any{
				"event":          map[string]any{"name": "signup", "properties": map[string]any{"plan": "pro"}, "timestamp": "2026-11-21T18:13:00.250Z"},
				"unsubscribeUrl": "",
			},
		},
		{
			desc: "without an event a caller variable named event stays",
			ctx:  Context{Variables: map[string]any{"event": "caller"}},
			want: map[string]any{"event": "caller", "unsubscribeUrl": ""},
		},
		{
			desc: "contact without user id or properties",
			ctx:  Context{Contact: &Contact{ContactID: "cnt_2", Email: "b@example.com"}},
			want: map[string]any{
				"contact":        map[string]any{"contactId": "cnt_2", "email": "b@example.com", "userId": nil, "subscribed": false, "properties": map[string]any{}},
				"unsubscribeUrl": "",
			},
		},
		{
			desc: "event without properties",
			ctx:  Context{Event: &Event{Name: "ping", Timestamp: time.Unix(0, 0)}},
			want: map[string]any{
				"event":          map[string]any{"name": "ping", "properties": map[string]any{}, "timestamp": "1970-01-01T00:00:00.000Z"},
				"unsubscribeUrl": "",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			before := cloneAny(tt.ctx.Variables)
			got := tt.ctx.Bindings()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Bindings() =\n%#v\nwant\n%#v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.ctx.Variables, before) {
				t.Error("Bindings modified the caller's variables")
			}
		})
	}
}

func TestBindingsForPreview(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		vars map[string]any
		want map[string]any
	}{
		{desc: "nil", vars: nil, want: map[string]any{}},
		{
			desc: "contact and event used as given, properties also on the contact",
			vars: map[string]any{
				"contact":        map[string]any{"email": "a@example.com", "properties": map[string]any{"firstName": "Ada", "email": "x"}},
				"event":          map[string]any{"name": "signup"},
				"unsubscribeUrl": "https://preview/u",
				"items":          []any{"a"},
			},
			want: map[string]any{
				"contact":        map[string]any{"email": "a@example.com", "firstName": "Ada", "properties": map[string]any{"firstName": "Ada", "email": "x"}},
				"event":          map[string]any{"name": "signup"},
				"unsubscribeUrl": "https://preview/u",
				"items":          []any{"a"},
			},
		},
		{desc: "contact that is not an object", vars: map[string]any{"contact": "x"}, want: map[string]any{"contact": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			before := cloneAny(tt.vars)
			if got := BindingsForPreview(tt.vars); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("BindingsForPreview =\n%#v\nwant\n%#v", got, tt.want)
			}
			if !reflect.DeepEqual(tt.vars, before) {
				t.Error("BindingsForPreview modified its argument")
			}
		})
	}
}

// cloneAny deep-copies maps so a test can see whether a function wrote to its
// argument.
func cloneAny[T any](v T) T {
	var out any = v
	if m, ok := out.(map[string]any); ok && m != nil {
		c := make(map[string]any, len(m))
		for k, v := range m {
			c[k] = cloneAny(v)
		}
		out = c
	}
	return out.(T)
}
