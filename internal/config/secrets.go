package config

import (
	"fmt"
	"strings"
)

// MinSecretBytes is the shortest secret a deployed process accepts
// (ADDENDUM 25): 256 bits, what the HMACs keyed by them can use.
const MinSecretBytes = 32

// knownSecrets are the secrets the repository writes down: in scripts,
// compose, benchmarks, docs and code. Anyone can read them, so outside
// DEV_MODE they refuse the start. TestEveryExampleSecretIsKnown keeps the
// list complete.
var knownSecrets = []string{
	DevTrackingSecret,
	"dev-dashboard-secret", "dev-tracking-secret",
	"chaos-dashboard-secret", "chaos-tracking-secret",
	"bench-dashboard-secret", "bench-tracking-secret",
	"test-dashboard-secret", "secret", "s3cret", "changeme", "change-me",
}

func isKnownSecret(s string) bool {
	s = strings.TrimSpace(s)
	for _, k := range knownSecrets {
		if strings.EqualFold(s, k) {
			return true
		}
	}
	return false
}

// Secure applies the rules a deployed process starts under (ADDENDUM 25):
// every secret set has at least MinSecretBytes and is none of the
// repository's examples, TRACKING_SECRET is set (the outbox's fixed one is
// public), and HS256 session tokens are checked against an issuer and an
// audience. DEV_MODE=true waives them; Warnings then says what was
// waived, for the log.
func (c *Config) Secure() error {
	if c.DevMode {
		return nil
	}
	var errs []string
	if c.TrackingSecretGenerated {
		errs = append(errs, "TRACKING_SECRET is required (the outbox's fixed development secret is public; DEV_MODE=true allows it)")
	}
	for _, s := range c.secrets() {
		switch {
		case s.value == "":
		case isKnownSecret(s.value):
			errs = append(errs, s.name+" is a secret published in the repository's examples: generate one (openssl rand -hex 32)")
		case len(s.value) < MinSecretBytes:
			errs = append(errs, fmt.Sprintf("%s must be at least %d bytes, got %d (openssl rand -hex 32)", s.name, MinSecretBytes, len(s.value)))
		}
	}
	if c.DashboardJWTSecret != "" {
		// An HS256 token names no issuer the process could check; iss and
		// aud pinned by configuration keep a token minted for another
		// service under the same secret from opening a session here.
		if c.DashboardJWTIssuer == "" {
			errs = append(errs, "DASHBOARD_JWT_ISSUER is required with DASHBOARD_JWT_SECRET (HS256 sessions check iss and aud; DEV_MODE=true skips them)")
		}
		if c.DashboardJWTAudience == "" {
			errs = append(errs, "DASHBOARD_JWT_AUDIENCE is required with DASHBOARD_JWT_SECRET (HS256 sessions check iss and aud; DEV_MODE=true skips them)")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("insecure configuration: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Warnings lists what DEV_MODE lets through that Secure would refuse, so
// that a process started in development says so in its log.
func (c *Config) Warnings() []string {
	if !c.DevMode {
		return nil
	}
	dev := *c
	dev.DevMode = false
	err := dev.Secure()
	if err == nil {
		return nil
	}
	return strings.Split(strings.TrimPrefix(err.Error(), "insecure configuration: "), "; ")
}

type secret struct{ name, value string }

func (c *Config) secrets() []secret {
	return []secret{
		{"TRACKING_SECRET", string(c.TrackingSecret)},
		{"CURSOR_SECRET", string(c.CursorSecret)},
		{"DASHBOARD_JWT_SECRET", c.DashboardJWTSecret},
		{"METRICS_TOKEN", c.MetricsToken},
	}
}

// redacted replaces a password in a connection string.
const redacted = "xxxxx"

// RedactURL is a connection string fit for a log line or an error: its
// password replaced, also when the string does not parse as a URL.
func RedactURL(raw string) string {
	if pw := password(raw); pw != "" {
		return strings.ReplaceAll(raw, pw, redacted)
	}
	return raw
}

// RedactError hides the password of the connection string raw wherever a
// driver's error repeats it (url.Parse's error quotes the whole string).
// The result unwraps to err.
func RedactError(err error, raw string) error {
	if err == nil {
		return nil
	}
	pw := password(raw)
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), pw, redacted), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// password finds the password of scheme://user:password@host... without
// parsing the URL, which fails on exactly the strings an error quotes:
// between the user's colon and the last @. A password with a raw / or @
// is found too; an @ later in the string only makes more text hidden.
func password(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	user, pw, ok := strings.Cut(rest[:at], ":")
	if !ok || pw == "" || strings.ContainsAny(user, "/?#") {
		return ""
	}
	return pw
}
