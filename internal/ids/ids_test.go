package ids_test

import (
	"strings"
	"testing"

	"tidings/internal/ids"
)

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		id   string
		want bool
	}{
		{desc: "caller-chosen", id: "welcome-1.v2_b", want: true},
		{desc: "one character", id: "a", want: true},
		{desc: "64 characters", id: strings.Repeat("a", 64), want: true},
		{desc: "generated", id: ids.New(ids.Send), want: true},
		{desc: "empty", id: "", want: false},
		{desc: "65 characters", id: strings.Repeat("a", 65), want: false},
		{desc: "starts with a separator", id: "-a", want: false},
		{desc: "slash", id: "a/b", want: false},
		{desc: "space", id: "a b", want: false},
		{desc: "non-ASCII letter", id: "é", want: false},
		{desc: "trailing newline", id: "a\n", want: false},
	}
	for _, tt := range tests {
		if got := ids.Valid(tt.id); got != tt.want {
			t.Errorf("%s: Valid(%q) = %v, want %v", tt.desc, tt.id, got, tt.want)
		}
	}
}
