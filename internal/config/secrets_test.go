package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// strong is a secret a deployment could use: 32 bytes or more, in no
// example of the repository.
const strong = "0123456789abcdef0123456789abcdef-strong"

// deployed is the environment of a deployed process that passes Secure.
func deployed(extra map[string]string) map[string]string {
	m := map[string]string{"TRACKING_SECRET": strong + "-tracking", "DASHBOARD_OIDC_ISSUER": "https://id.example.com",
		"DASHBOARD_OIDC_AUDIENCE": "tidings-dashboard"}
	for k, v := range extra {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

func secure(t *testing.T, m map[string]string) error {
	t.Helper()
	c, err := FromLookup(env(m))
	if err != nil {
		return err
	}
	return c.Secure()
}

// ADDENDUM 25: secrets have at least 32 bytes, a secret known from the
// repository's examples refuses the start, and DEV_MODE=true waives both.
func TestSecretsLengthAndKnownValues(t *testing.T) {
	t.Parallel()
	if err := secure(t, deployed(nil)); err != nil {
		t.Fatalf("a deployed configuration: %v", err)
	}
	for _, tt := range []struct {
		desc string
		env  map[string]string
		want string
	}{
		{desc: "short tracking secret", env: deployed(map[string]string{"TRACKING_SECRET": "too-short"}), want: "TRACKING_SECRET"},
		{desc: "compose's tracking secret", env: deployed(map[string]string{"TRACKING_SECRET": "dev-tracking-secret"}), want: "TRACKING_SECRET"},
		{desc: "the outbox's fixed secret, set", env: deployed(map[string]string{"TRACKING_SECRET": DevTrackingSecret}), want: "TRACKING_SECRET"},
		{desc: "the outbox's fixed secret, by default", env: deployed(map[string]string{"TRACKING_SECRET": ""}), want: "TRACKING_SECRET"},
		{desc: "short cursor secret", env: deployed(map[string]string{"CURSOR_SECRET": "sixteen-chars-ok"}), want: "CURSOR_SECRET"},
		{desc: "short metrics token", env: deployed(map[string]string{"METRICS_TOKEN": "metrics"}), want: "METRICS_TOKEN"},
		{desc: "make token's old default", env: deployed(map[string]string{"DASHBOARD_JWT_SECRET": "dev-dashboard-secret",
			"DASHBOARD_JWT_ISSUER": "tidings", "DASHBOARD_JWT_AUDIENCE": "dashboard"}), want: "DASHBOARD_JWT_SECRET"},
		{desc: "a known secret padded to length is still known", env: deployed(map[string]string{
			"TRACKING_SECRET": "  " + DevTrackingSecret + "  "}), want: "TRACKING_SECRET"},
	} {
		err := secure(t, tt.env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error naming %s", tt.desc, err, tt.want)
			continue
		}
		dev := map[string]string{"DEV_MODE": "true"}
		for k, v := range tt.env {
			dev[k] = v
		}
		if err := secure(t, dev); err != nil {
			t.Errorf("%s with DEV_MODE=true: %v", tt.desc, err)
		}
	}
}

// Every secret the repository writes down (scripts, compose, benchmarks,
// the README) is in knownSecrets, so none of them can run a deployment.
func TestEveryExampleSecretIsKnown(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	// NAME=value, NAME: value, NAME = "value", NAME=${NAME:-value}; not
	// NAME=$variable.
	assign := regexp.MustCompile(`(TRACKING_SECRET|DASHBOARD_JWT_SECRET|CURSOR_SECRET|METRICS_TOKEN|jwtSecret)\s*[:=]-?\s*(\$\{[A-Z_]*:-|\$)?"?([A-Za-z0-9][A-Za-z0-9._-]{5,})`)
	found := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "var", "bin", "docsassets", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".yml", ".yaml", ".md", ".env", "":
		default:
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range assign.FindAllStringSubmatch(string(b), -1) {
			v := m[3]
			if m[2] == "$" {
				continue
			}
			if strings.HasPrefix(v, "DASHBOARD_") || strings.HasPrefix(v, "TRACKING_") || v == "required" || v == "unset" {
				continue
			}
			found++
			if !isKnownSecret(v) {
				t.Errorf("%s: %s=%s is not in knownSecrets", path, m[1], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no example secret found: the scan is broken")
	}
}

// HS256 session tokens carry no issuer of their own: outside DEV_MODE they
// need DASHBOARD_JWT_ISSUER and DASHBOARD_JWT_AUDIENCE, checked on every
// token.
func TestHS256NeedsIssuerAndAudienceOutsideDevMode(t *testing.T) {
	t.Parallel()
	hs := map[string]string{"DASHBOARD_JWT_SECRET": strong + "-jwt"}
	if err := secure(t, deployed(hs)); err == nil || !strings.Contains(err.Error(), "DASHBOARD_JWT_ISSUER") {
		t.Fatalf("HS256 without issuer and audience: %v", err)
	}
	hs["DASHBOARD_JWT_ISSUER"] = "https://tidings.example.com"
	if err := secure(t, deployed(hs)); err == nil || !strings.Contains(err.Error(), "DASHBOARD_JWT_AUDIENCE") {
		t.Fatalf("HS256 without audience: %v", err)
	}
	hs["DASHBOARD_JWT_AUDIENCE"] = "tidings-dashboard"
	c, err := FromLookup(env(deployed(hs)))
	if err != nil || c.Secure() != nil || c.DashboardJWTIssuer != "https://tidings.example.com" || c.DashboardJWTAudience != "tidings-dashboard" {
		t.Fatalf("HS256 with issuer and audience: %+v %v", c, err)
	}
	if err := secure(t, map[string]string{"DEV_MODE": "true", "DASHBOARD_JWT_SECRET": "dev"}); err != nil {
		t.Fatalf("DEV_MODE: %v", err)
	}
}

// Without DASHBOARD_OIDC_AUDIENCE the verifier would accept a token the
// issuer minted for any other application: OIDC needs it, in DEV_MODE too.
func TestOIDCNeedsAnAudience(t *testing.T) {
	t.Parallel()
	for _, m := range []map[string]string{
		{"DASHBOARD_OIDC_ISSUER": "https://id.example.com"},
		{"DASHBOARD_OIDC_ISSUER": "https://id.example.com", "DEV_MODE": "true"},
	} {
		if _, err := FromLookup(env(m)); err == nil || !strings.Contains(err.Error(), "DASHBOARD_OIDC_AUDIENCE") {
			t.Errorf("%v: %v", m, err)
		}
	}
}

// The admin listener, the metrics token, DEV_MODE and the limit of
// unauthenticated requests: defaults and overrides.
func TestSecuritySettings(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil || c.APIAdminAddr != "127.0.0.1:9090" || c.MetricsToken != "" || c.DevMode || c.UnauthRateLimitPerMinute != 600 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = FromLookup(env(map[string]string{"API_ADMIN_ADDR": "10.0.0.1:9100", "METRICS_TOKEN": strong,
		"DEV_MODE": "true", "UNAUTH_RATE_LIMIT_PER_MINUTE": "60"}))
	if err != nil || c.APIAdminAddr != "10.0.0.1:9100" || c.MetricsToken != strong || !c.DevMode || c.UnauthRateLimitPerMinute != 60 {
		t.Fatalf("overrides: %+v %v", c, err)
	}
	for name, val := range map[string]string{"API_ADMIN_ADDR": "nine", "DEV_MODE": "yes please", "UNAUTH_RATE_LIMIT_PER_MINUTE": "0"} {
		if _, err := FromLookup(env(map[string]string{name: val})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, val, err)
		}
	}
}

// A connection string's password never reaches an error message (which
// the process logs): not from our own checks, nor from a driver's.
func TestConnectionStringPasswordsNeverInErrors(t *testing.T) {
	t.Parallel()
	const pw = "hunter2-Pa55word"
	for _, tt := range []struct{ name, val string }{
		{"DATABASE_URL", "postgres://tidings:" + pw + "@db.example.com:notaport/tidings"},
		{"DATABASE_URL", "mysql://tidings:" + pw + "@db.example.com/tidings"},
		{"REDIS_URL", "redis://default:" + pw + "@cache.example.com:port/0"},
		{"REDIS_URL", "http://default:" + pw + "@cache.example.com/0"},
		{"SMTP_URL", "http://user:" + pw + "@mail.example.com:25"},
		{"SMTP_URL", "smtp://user:" + pw + "@mail.example.com:x25"},
	} {
		_, err := FromLookup(env(map[string]string{tt.name: tt.val}))
		if err == nil || !strings.Contains(err.Error(), tt.name) || strings.Contains(err.Error(), pw) {
			t.Errorf("%s=%s: %v", tt.name, tt.val, err)
		}
	}
	for _, tt := range []struct{ url, want string }{
		{"postgres://u:" + pw + "@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"redis://:" + pw + "@h:6379/0", "redis://:xxxxx@h:6379/0"},
		{"smtp://u:" + pw + "@h:x25", "smtp://u:xxxxx@h:x25"},
		{"postgres://h/db", "postgres://h/db"},
	} {
		if got := RedactURL(tt.url); got != tt.want {
			t.Errorf("RedactURL(%s) = %s, want %s", tt.url, got, tt.want)
		}
	}
	raw := "postgres://u:" + pw + "@h:bad/db"
	wrapped := RedactError(errors.New(`parse "`+raw+`": invalid port`), raw)
	if strings.Contains(wrapped.Error(), pw) || !strings.Contains(wrapped.Error(), "invalid port") {
		t.Errorf("RedactError: %v", wrapped)
	}
	if _, err := OpenRedis(t.Context(), "redis://u:"+pw+"@h:port/0"); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("OpenRedis: %v", err)
	}
	if _, err := AsynqRedis("redis://u:" + pw + "@h:port/0"); err == nil || strings.Contains(err.Error(), pw) {
		t.Errorf("AsynqRedis: %v", err)
	}
}
