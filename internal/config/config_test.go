package config

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8080" || c.WorkerAdminAddr != "127.0.0.1:8081" || !c.AsynqmonReadOnly || c.WorkerConcurrency != 10 || c.RateLimitPerMinute != 100 ||
		c.SegmentComputeEvery != time.Minute || c.SendMaxAttempts != 5 || c.DomainCheckInterval != 10*time.Minute ||
		c.PlanFreeContacts != 1000 || c.PlanFreeTemplates != 100 || c.PlanFreeSequences != 20 ||
		c.EmailProvider != "outbox" || c.OutboxDir != "./var/outbox" || c.DKIMCNAMESuffix != "dkim.tidings.email" ||
		c.SendgridAPIURL != "https://api.sendgrid.com" || !c.Migrate || !c.TrackingSecretGenerated ||
		c.DatabaseURL != "postgres://postgres@127.0.0.1:5432/tidings?sslmode=disable" || c.RedisURL != "redis://127.0.0.1:6379/0" ||
		c.APIKeyCacheTTL != 5*time.Second || c.RenderMaxLoopIterations != 100000 || c.RenderMaxStringBytes != 10<<20 ||
		c.RenderMaxOutputBytes != 10<<20 || c.RenderMaxTime != 2*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	if c.ProviderConnected() {
		t.Fatal("outbox never counts as a connected provider")
	}
}

// ADDENDUM 1: api and worker must share TRACKING_SECRET; only the outbox
// (development) runs without one, on a fixed secret both processes know.
func TestTrackingSecretRequiredWithARealProvider(t *testing.T) {
	t.Parallel()
	for _, p := range []map[string]string{
		{"EMAIL_PROVIDER": "sendgrid", "SENDGRID_API_KEY": "SG.x"},
		{"EMAIL_PROVIDER": "smtp", "SMTP_URL": "smtp://relay.example.com:25"},
	} {
		_, err := FromLookup(env(p))
		if err == nil || !strings.Contains(err.Error(), "TRACKING_SECRET") {
			t.Errorf("%v without TRACKING_SECRET: %v", p, err)
		}
	}
	a, err := FromLookup(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := FromLookup(env(map[string]string{"EMAIL_PROVIDER": "outbox"}))
	if !a.TrackingSecretGenerated || !bytes.Equal(a.TrackingSecret, b.TrackingSecret) || len(a.TrackingSecret) < 32 {
		t.Fatalf("outbox: two processes must get the same development secret: %q %q", a.TrackingSecret, b.TrackingSecret)
	}
}

// SEND_CLAIM_TIMEOUT has a floor (issues 20 and 35): a claim must outlive
// the longest life of the attempt holding it (SEND_ATTEMPT_TIMEOUT and the
// writes after it), or a slow attempt still running would be handed to a
// second worker; an attempt must outlive one provider call.
func TestClaimTimeoutFloor(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil || c.ProviderTimeout != 30*time.Second || c.SendClaimTimeout != 5*time.Minute || c.SendAttemptTimeout != 2*time.Minute {
		t.Fatalf("defaults: %v %v %v %v", c.ProviderTimeout, c.SendClaimTimeout, c.SendAttemptTimeout, err)
	}
	for _, tc := range []struct {
		desc              string
		provider, attempt string
		claim             string
		ok                bool
	}{
		{desc: "the review's fault run: 15 s claims under a 2-minute attempt", provider: "3s", claim: "15s"},
		{desc: "twice the provider's timeout, under the attempt", provider: "30s", claim: "60s"},
		{desc: "exactly the attempt and its allowance", provider: "5s", attempt: "10s", claim: "30s", ok: true},
		{desc: "a second short", provider: "5s", attempt: "10s", claim: "29s"},
		{desc: "an attempt shorter than a provider call", provider: "30s", attempt: "20s", claim: "5m"},
		{desc: "the defaults' claim with a longer attempt", attempt: "5m", claim: "5m"},
	} {
		vars := map[string]string{"SEND_CLAIM_TIMEOUT": tc.claim}
		if tc.provider != "" {
			vars["PROVIDER_TIMEOUT"] = tc.provider
		}
		if tc.attempt != "" {
			vars["SEND_ATTEMPT_TIMEOUT"] = tc.attempt
		}
		_, err := FromLookup(env(vars))
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.desc, err)
		}
		if err != nil && !strings.Contains(err.Error(), "SEND_") {
			t.Errorf("%s: the error names no variable: %v", tc.desc, err)
		}
	}
}

func TestInvalidValuesNameTheVariable(t *testing.T) {
	t.Parallel()
	for name, val := range map[string]string{
		"HTTP_ADDR": "nonsense", "RATE_LIMIT_PER_MINUTE": "-3", "SEGMENT_COMPUTE_INTERVAL": "soon",
		"EMAIL_PROVIDER": "pigeon", "DATABASE_URL": "mysql://x", "REDIS_URL": "::", "MIGRATE": "perhaps",
		"SEND_MAX_ATTEMPTS": "0", "DNS_RESOLVER": "nohost", "SMTP_URL": "http://x", "PLAN_FREE_CONTACTS": "many",
		"SENDGRID_WEBHOOK_PUBLIC_KEY": "%%%", "DOMAIN_CHECK_INTERVAL": "-1m", "PUBLIC_BASE_URL": "ftp://x",
		"API_KEY_CACHE_TTL": "2h", "RENDER_MAX_LOOP_ITERATIONS": "0", "RENDER_MAX_STRING_BYTES": "10MiB",
		"RENDER_MAX_OUTPUT_BYTES": "-1", "RENDER_MAX_TIME": "0s", "CURSOR_SECRET": "too short",
		"WORKER_CONCURRENCY": "0", "ASYNQMON_READONLY": "maybe", "PROVIDER_TIMEOUT": "soon",
	} {
		_, err := FromLookup(env(map[string]string{name: val}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, val, err)
		}
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(map[string]string{"RATE_LIMIT_PER_MINUTE": "5000", "EMAIL_PROVIDER": "sendgrid",
		"SENDGRID_API_KEY": "SG.x", "TRACKING_SECRET": "abc", "PUBLIC_BASE_URL": "https://t.example.com/", "MIGRATE": "false",
		"API_KEY_CACHE_TTL": "0", "RENDER_MAX_LOOP_ITERATIONS": "5000", "RENDER_MAX_TIME": "500ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitPerMinute != 5000 || !c.ProviderConnected() || string(c.TrackingSecret) != "abc" ||
		c.TrackingSecretGenerated || c.PublicBaseURL != "https://t.example.com" || c.Migrate || c.APIKeyCacheTTL != 0 ||
		c.RenderMaxLoopIterations != 5000 || c.RenderMaxTime != 500*time.Millisecond {
		t.Fatalf("%+v", c)
	}
}

// The cursor key comes from configuration: CURSOR_SECRET when set, else
// TRACKING_SECRET, always through a purpose label so that it never equals
// the tracking key.
func TestCursorKey(t *testing.T) {
	t.Parallel()
	key := func(m map[string]string) []byte {
		t.Helper()
		c, err := FromLookup(env(m))
		if err != nil {
			t.Fatal(err)
		}
		return c.CursorKey()
	}
	a := key(map[string]string{"TRACKING_SECRET": "tracking-secret-a"})
	if len(a) != 32 || bytes.Equal(a, []byte("tracking-secret-a")) {
		t.Fatalf("derived key %x", a)
	}
	if !bytes.Equal(a, key(map[string]string{"TRACKING_SECRET": "tracking-secret-a"})) {
		t.Fatal("the same secret must give the same key (several instances)")
	}
	if bytes.Equal(a, key(map[string]string{"TRACKING_SECRET": "tracking-secret-b"})) {
		t.Fatal("another tracking secret gives the same key")
	}
	c := key(map[string]string{"TRACKING_SECRET": "tracking-secret-a", "CURSOR_SECRET": "a cursor secret of 16+"})
	if bytes.Equal(a, c) {
		t.Fatal("CURSOR_SECRET is ignored")
	}
	if !bytes.Equal(key(nil), key(nil)) {
		t.Fatal("without secrets (outbox) every instance must derive the development key")
	}
}

// The group commit of POST /api/events (INGEST_*): defaults, overrides,
// INGEST_BATCH_WAIT=0 (never wait) and the bounds.
func TestIngestSettings(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil || c.IngestBatchMax != 100 || c.IngestBatchWait != 2*time.Millisecond || c.IngestQueue != 1000 || c.IngestWriters != 2 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = FromLookup(env(map[string]string{"INGEST_BATCH_MAX": "500", "INGEST_BATCH_WAIT": "0",
		"INGEST_QUEUE": "50", "INGEST_WRITERS": "4"}))
	if err != nil || c.IngestBatchMax != 500 || c.IngestBatchWait != 0 || c.IngestQueue != 50 || c.IngestWriters != 4 {
		t.Fatalf("overrides: %+v %v", c, err)
	}
	for name, val := range map[string]string{"INGEST_BATCH_MAX": "1001", "INGEST_BATCH_WAIT": "1s",
		"INGEST_QUEUE": "0", "INGEST_WRITERS": "65"} {
		if _, err := FromLookup(env(map[string]string{name: val})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, val, err)
		}
	}
}

// The import limits (IMPORT_*): defaults, overrides and the bounds.
func TestImportSettings(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil || c.ImportMaxRunning != 2 || c.ImportMaxUploads != 8 || c.ImportUploadTimeout != 10*time.Minute ||
		c.ImportSpoolDir != "" || c.ImportDBConns != 4 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = FromLookup(env(map[string]string{"IMPORT_MAX_RUNNING": "5", "IMPORT_MAX_UPLOADS": "20",
		"IMPORT_UPLOAD_TIMEOUT": "2m", "IMPORT_SPOOL_DIR": "/srv/spool", "IMPORT_DB_CONNS": "8"}))
	if err != nil || c.ImportMaxRunning != 5 || c.ImportMaxUploads != 20 || c.ImportUploadTimeout != 2*time.Minute ||
		c.ImportSpoolDir != "/srv/spool" || c.ImportDBConns != 8 {
		t.Fatalf("overrides: %+v %v", c, err)
	}
	for name, val := range map[string]string{"IMPORT_MAX_RUNNING": "0", "IMPORT_MAX_UPLOADS": "1001",
		"IMPORT_UPLOAD_TIMEOUT": "2h", "IMPORT_DB_CONNS": "65"} {
		if _, err := FromLookup(env(map[string]string{name: val})); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v", name, val, err)
		}
	}
	if _, err := FromLookup(env(map[string]string{"IMPORT_UPLOAD_TIMEOUT": "0s"})); err == nil {
		t.Error("IMPORT_UPLOAD_TIMEOUT=0s accepted")
	}
}

// ADDENDUM 26 and 25: WORKER_ROLES is passed on as written (worker.ParseRoles
// judges it); ADMIN_HOSTS is a comma-separated list.
func TestWorkerRolesAndAdminHosts(t *testing.T) {
	t.Parallel()
	c, err := FromLookup(env(nil))
	if err != nil || c.WorkerRoles != "all" || c.AdminHosts != nil {
		t.Fatalf("defaults: %q %v %v", c.WorkerRoles, c.AdminHosts, err)
	}
	c, err = FromLookup(env(map[string]string{"WORKER_ROLES": "sends,segments", "ADMIN_HOSTS": " admin.example, ,worker:8081,"}))
	if err != nil || c.WorkerRoles != "sends,segments" || strings.Join(c.AdminHosts, "|") != "admin.example|worker:8081" {
		t.Fatalf("set: %q %q %v", c.WorkerRoles, c.AdminHosts, err)
	}
}
