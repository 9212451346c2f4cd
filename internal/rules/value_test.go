package rules

import "testing"

func TestIsJSONNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		in   string
		want bool
	}{
		{desc: "integer", in: "42", want: true},
		{desc: "negative fraction", in: "-0.5", want: true},
		{desc: "exponent", in: "1e-7", want: true},
		{desc: "signed exponent with fraction", in: "2.50E+3", want: true},
		{desc: "zero", in: "0", want: true},
		{desc: "leading zero", in: "01", want: false},
		{desc: "leading plus", in: "+1", want: false},
		{desc: "bare point", in: ".5", want: false},
		{desc: "trailing point", in: "1.", want: false},
		{desc: "hexadecimal (YAML)", in: "0x1F", want: false},
		{desc: "infinity (YAML)", in: ".inf", want: false},
		{desc: "underscores (YAML 1.1)", in: "1_000", want: false},
		{desc: "empty", in: "", want: false},
	}
	for _, tt := range tests {
		if got := IsJSONNumber(tt.in); got != tt.want {
			t.Errorf("%s: IsJSONNumber(%q) = %v, want %v", tt.desc, tt.in, got, tt.want)
		}
	}
}
