package contacts

import "testing"

func TestNormalizeEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"  Ann@Example.COM ", "ann@example.com", true},
		{"a.b+tag@sub.example.org", "a.b+tag@sub.example.org", true},
		{"", "", false},
		{"no-at.example.com", "", false},
		{"ann@localhost", "", false},
		{"Ann <ann@example.com>", "", false},
		{"ann@@example.com", "", false},
		{"ann@example..com", "", false},
		{"ann @example.com", "", false},
		{"@example.com", "", false},
	}
	for _, tt := range tests {
		got, ok := NormalizeEmail(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
