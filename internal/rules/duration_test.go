package rules

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "5m", want: 5 * time.Minute},
		{in: "2h", want: 2 * time.Hour},
		{in: "1d", want: 24 * time.Hour},
		{in: "3w", want: 21 * 24 * time.Hour},
		{in: "0001d", want: 24 * time.Hour},
		{in: "15250w", want: 15250 * Week},
		{in: "15251w", wantErr: true}, // beyond time.Duration
		{in: "99999999999999999999s", wantErr: true},
		{in: "0s", wantErr: true},
		{in: "-1d", wantErr: true},
		{in: "+1d", wantErr: true},
		{in: "1.5d", wantErr: true},
		{in: "1h30m", wantErr: true},
		{in: "1 d", wantErr: true},
		{in: "1D", wantErr: true},
		{in: "1y", wantErr: true},
		{in: "1ms", wantErr: true},
		{in: "d", wantErr: true},
		{in: "1", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseDuration(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   time.Duration
		want string
	}{
		{30 * time.Second, "30s"},
		{90 * time.Second, "90s"},
		{time.Hour, "1h"},
		{48 * time.Hour, "2d"},
		{14 * Day, "2w"},
		{15 * Day, "15d"},
		{1500 * time.Millisecond, "1s"},
		{time.Millisecond, "0s"},
	}
	for _, tc := range tests {
		if got := FormatDuration(tc.in); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if d, err := ParseDuration(tc.want); err == nil && d != tc.in.Truncate(time.Second) {
			t.Errorf("FormatDuration(%v) does not parse back: %v", tc.in, d)
		}
	}
}
