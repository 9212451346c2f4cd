// Package config reads the service configuration from the environment
// (ADDENDUM section 1). Every value has a default in code; a value that is
// set but invalid fails start-up with a message naming the variable.
package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/throttle"
)

// Config is the whole configuration of the api and worker processes.
type Config struct {
	HTTPAddr string
	// APIAdminAddr is API_ADMIN_ADDR: the api's own admin listener, which
	// serves /metrics off the public port (ADDENDUM 25).
	APIAdminAddr    string
	WorkerAdminAddr string
	// DevMode is DEV_MODE: development, where Secure lets short secrets,
	// the repository's example secrets and HS256 sessions without an
	// issuer and audience through (with a warning).
	DevMode bool
	// AsynqmonReadOnly keeps the dashboard from changing tasks
	// (ASYNQMON_READONLY, default true).
	AsynqmonReadOnly bool
	// WorkerConcurrency is how many tasks one worker process runs at once.
	WorkerConcurrency int
	DatabaseURL       string
	RedisURL          string
	// RedisCluster: REDIS_URL names a Redis Cluster (REDIS_CLUSTER=true).
	RedisCluster  bool
	PublicBaseURL string
	Migrate       bool

	TrackingSecret []byte
	// TrackingSecretGenerated: TRACKING_SECRET was not set and the outbox's
	// fixed development secret is in use.
	TrackingSecretGenerated bool
	// CursorSecret is CURSOR_SECRET; empty means the cursor key is derived
	// from TrackingSecret (see CursorKey).
	CursorSecret []byte

	DashboardJWTSecret string
	// DashboardJWTIssuer and DashboardJWTAudience (DASHBOARD_JWT_ISSUER,
	// DASHBOARD_JWT_AUDIENCE) are the iss and aud every HS256 session
	// token must carry; outside DEV_MODE HS256 needs both.
	DashboardJWTIssuer    string
	DashboardJWTAudience  string
	DashboardOIDCIssuer   string
	DashboardOIDCAudience string
	// MetricsToken is METRICS_TOKEN: the bearer that /metrics on the
	// public port answers to; unset, only the admin listener serves it.
	MetricsToken string

	EmailProvider            string
	OutboxDir                string
	SendgridAPIKey           string
	SendgridAPIURL           string
	SendgridWebhookPublicKey string
	SMTPURL                  string
	// Providers is the pool in order of preference (PROVIDERS; a pool of
	// EMAIL_PROVIDER alone when unset); TransactionalProviders and
	// MarketingProviders are each stream's ordered subset of it
	// (TRANSACTIONAL_PROVIDERS, MARKETING_PROVIDERS; default: the pool).
	Providers              []string
	TransactionalProviders []string
	MarketingProviders     []string
	// ProviderRetryAfter is PROVIDER_RETRY_AFTER: how long an open circuit
	// skips its provider before one message may try it again (half-open).
	ProviderRetryAfter time.Duration
	// Amazon SES v2: SES_REGION, SES_CONFIGURATION_SET, SES_ENDPOINT
	// (another endpoint for the SDK, e.g. a local fake), and the hosts
	// SNS signing certificates and subscription URLs may come from
	// (SES_SNS_CERT_HOSTS; default sns.<SES_REGION>.amazonaws.com).
	// SESSNSTopicARNs, when set, are the only topics whose notifications
	// are taken (SES_SNS_TOPIC_ARNS).
	SESRegion           string
	SESConfigurationSet string
	SESEndpoint         string
	SESSNSCertHosts     []string
	SESSNSTopicARNs     []string

	DNSResolver        string
	DKIMCNAMESuffix    string
	SandboxFromAddress string
	RateLimitPerMinute int
	// UnauthRateLimitPerMinute is UNAUTH_RATE_LIMIT_PER_MINUTE: requests
	// under /api without a valid credential, per client address.
	UnauthRateLimitPerMinute int
	APIKeyCacheTTL           time.Duration
	SegmentComputeEvery      time.Duration
	// LiveSegmentTick is how often live segments' time rules are judged
	// again (LIVE_SEGMENT_TICK); LiveSegmentReconcile how often each live
	// segment's full compute checks the incremental work
	// (LIVE_SEGMENT_RECONCILE; ADDENDUM 21).
	LiveSegmentTick      time.Duration
	LiveSegmentReconcile time.Duration
	SendMaxAttempts      int
	// SendClaimTimeout is how old a scheduled send's or broadcast
	// recipient's claim must be before the sweep takes it back (its worker
	// died): at least an attempt's longest life, so a slow attempt is never
	// doubled.
	SendClaimTimeout time.Duration
	// SendAttemptTimeout is SEND_ATTEMPT_TIMEOUT: how long one attempt at
	// a batch of due sends (claim, rate waits, records, provider calls)
	// may run before its context ends.
	SendAttemptTimeout time.Duration
	// ProviderTimeout is PROVIDER_TIMEOUT: the longest wait for the
	// provider's answer to one message; no answer leaves it in doubt.
	ProviderTimeout time.Duration
	// ProviderRatePerSecond is PROVIDER_RATE_PER_SECOND: messages a second
	// to the provider for every process together; 0 is no limit.
	ProviderRatePerSecond int
	// DestinationLimits is DESTINATION_LIMITS: messages per minute per
	// mailbox provider (by MX host suffix), for every worker together.
	DestinationLimits   []throttle.Limit
	DomainCheckInterval time.Duration
	// WebhookRetrySchedule is WEBHOOK_RETRY_SCHEDULE: the waits between
	// outbound webhook attempts.
	WebhookRetrySchedule []time.Duration
	// WebhookAllowPrivateTargets is WEBHOOK_ALLOW_PRIVATE_TARGETS: outbound
	// webhooks may reach loopback and private addresses (development).
	WebhookAllowPrivateTargets bool
	// RetentionInterval is RETENTION_INTERVAL: how often events past their
	// tenant's retention are archived; ArchiveDir (ARCHIVE_DIR) is where.
	RetentionInterval time.Duration
	ArchiveDir        string
	// PauseMinSample is PAUSE_MIN_SAMPLE: outcomes needed before the
	// deliverability guard may pause a tenant.
	PauseMinSample int

	PlanFreeContacts  int
	PlanFreeTemplates int
	PlanFreeSequences int

	// Limits of one template render (render.RendererOptions): a template
	// that needs more is VALIDATION_ERROR in a preview or send, and fails
	// a scheduled send.
	RenderMaxLoopIterations int
	RenderMaxStringBytes    int
	RenderMaxOutputBytes    int
	RenderMaxTime           time.Duration

	// Group commit of POST /api/events (events.Ingest): at most
	// IngestBatchMax events per transaction (INGEST_BATCH_MAX), a batch
	// waiting at most IngestBatchWait for company while another is being
	// written (INGEST_BATCH_WAIT; 0 never waits), IngestQueue events
	// waiting beyond the batches (INGEST_QUEUE; past it 503 with
	// Retry-After), IngestWriters batch transactions at once
	// (INGEST_WRITERS).
	IngestBatchMax  int
	IngestBatchWait time.Duration
	IngestQueue     int
	IngestWriters   int

	// Contact import limits (docs/decisions.md "Import limits"): a
	// tenant's imports uploading or running at once (IMPORT_MAX_RUNNING;
	// past it 429), uploads one api instance receives at once
	// (IMPORT_MAX_UPLOADS; past it 503), the longest an upload may take
	// (IMPORT_UPLOAD_TIMEOUT), where bodies wait while they arrive
	// (IMPORT_SPOOL_DIR; empty: the system's temporary directory), and the
	// connections of the pool kept for imports' staging and processing
	// (IMPORT_DB_CONNS), apart from the pool of requests.
	ImportMaxRunning    int
	ImportMaxUploads    int
	ImportUploadTimeout time.Duration
	ImportSpoolDir      string
	ImportDBConns       int
	// WorkerRoles is WORKER_ROLES: the roles cmd/worker runs, "all" or a
	// comma-separated list (checked by worker.ParseRoles).
	WorkerRoles string
	// AdminHosts are the Host names, besides the loopback ones, that the
	// worker's dashboard answers to (ADMIN_HOSTS, comma-separated).
	AdminHosts []string
}

// ProviderConnected reports whether a real delivery provider is configured;
// only then may a tenant leave sandbox (ADDENDUM section 1).
// With a pool, any real provider in it connects the service.
func (c *Config) ProviderConnected() bool {
	// EMAIL_PROVIDER counts too: a Config changed after it was read (tests,
	// embedders) may name its provider there only.
	for _, name := range append(slices.Clone(c.Providers), c.EmailProvider) {
		switch name {
		case "sendgrid":
			if c.SendgridAPIKey != "" {
				return true
			}
		case "smtp":
			if c.SMTPURL != "" {
				return true
			}
		case "ses":
			if c.SESRegion != "" {
				return true
			}
		}
	}
	return false
}

// ProviderNames are the providers PROVIDERS may name.
var ProviderNames = []string{"sendgrid", "ses", "smtp", "outbox"}

const minCursorSecret = 16

// cursorKeyLabel names the purpose of the derived key, so that the cursor
// key differs from the tracking key even when both come from one secret.
const cursorKeyLabel = "tidings/page-cursor/v1"

// CursorKey is the key that signs pagination cursors: HMAC-SHA256 of a
// purpose label under CURSOR_SECRET, or under TRACKING_SECRET when
// CURSOR_SECRET is unset. Every api instance must derive the same key for a
// cursor to work on all of them.
func (c *Config) CursorKey() []byte {
	secret := c.CursorSecret
	if len(secret) == 0 {
		secret = c.TrackingSecret
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(cursorKeyLabel))
	return h.Sum(nil)
}

// Load reads the configuration from the process environment and applies
// the start-up rules on secrets (Secure): what cmd/api and cmd/worker run
// on. Tests build development configurations with FromLookup.
func Load() (*Config, error) {
	c, err := FromLookup(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if err := c.Secure(); err != nil {
		return nil, err
	}
	return c, nil
}

// FromLookup reads the configuration through lookup, so tests can supply
// their own environment.
func FromLookup(lookup func(string) (string, bool)) (*Config, error) {
	r := reader{lookup: lookup}
	c := &Config{
		HTTPAddr:                 r.addr("HTTP_ADDR", ":8080"),
		APIAdminAddr:             r.addr("API_ADMIN_ADDR", "127.0.0.1:9090"),
		DevMode:                  r.boolean("DEV_MODE", false),
		WorkerAdminAddr:          r.addr("WORKER_ADMIN_ADDR", "127.0.0.1:8081"),
		AsynqmonReadOnly:         r.boolean("ASYNQMON_READONLY", true),
		WorkerConcurrency:        r.positiveInt("WORKER_CONCURRENCY", 10),
		WorkerRoles:              r.str("WORKER_ROLES", "all"),
		AdminHosts:               splitList(r.str("ADMIN_HOSTS", "")),
		DatabaseURL:              r.url("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tidings?sslmode=disable", "postgres", "postgresql"),
		RedisURL:                 r.url("REDIS_URL", "redis://127.0.0.1:6379/0", "redis", "rediss"),
		RedisCluster:             r.boolean("REDIS_CLUSTER", false),
		PublicBaseURL:            strings.TrimRight(r.url("PUBLIC_BASE_URL", "http://localhost:8080", "http", "https"), "/"),
		Migrate:                  r.boolean("MIGRATE", true),
		DashboardJWTSecret:       r.str("DASHBOARD_JWT_SECRET", ""),
		DashboardJWTIssuer:       r.str("DASHBOARD_JWT_ISSUER", ""),
		DashboardJWTAudience:     r.str("DASHBOARD_JWT_AUDIENCE", ""),
		MetricsToken:             r.str("METRICS_TOKEN", ""),
		DashboardOIDCIssuer:      r.str("DASHBOARD_OIDC_ISSUER", ""),
		DashboardOIDCAudience:    r.str("DASHBOARD_OIDC_AUDIENCE", ""),
		EmailProvider:            r.oneOf("EMAIL_PROVIDER", "outbox", "outbox", "sendgrid", "smtp", "ses"),
		OutboxDir:                r.str("OUTBOX_DIR", "./var/outbox"),
		SendgridAPIKey:           r.str("SENDGRID_API_KEY", ""),
		SendgridAPIURL:           strings.TrimRight(r.url("SENDGRID_API_URL", "https://api.sendgrid.com", "http", "https"), "/"),
		SendgridWebhookPublicKey: r.str("SENDGRID_WEBHOOK_PUBLIC_KEY", ""),
		SMTPURL:                  r.str("SMTP_URL", ""),
		ProviderRetryAfter:       r.duration("PROVIDER_RETRY_AFTER", 30*time.Second),
		SESRegion:                r.str("SES_REGION", ""),
		SESConfigurationSet:      r.str("SES_CONFIGURATION_SET", ""),
		SESEndpoint:              r.optionalURL("SES_ENDPOINT", "http", "https"),
		SESSNSCertHosts:          splitList(r.str("SES_SNS_CERT_HOSTS", "")),
		SESSNSTopicARNs:          splitList(r.str("SES_SNS_TOPIC_ARNS", "")),
		DNSResolver:              r.hostPort("DNS_RESOLVER", ""),
		DKIMCNAMESuffix:          r.str("DKIM_CNAME_SUFFIX", "dkim.tidings.email"),
		SandboxFromAddress:       r.str("SANDBOX_FROM_ADDRESS", "sandbox@sandbox.tidings.email"),
		RateLimitPerMinute:       r.positiveInt("RATE_LIMIT_PER_MINUTE", 100),
		UnauthRateLimitPerMinute: r.positiveInt("UNAUTH_RATE_LIMIT_PER_MINUTE", 600),
		APIKeyCacheTTL:           r.durationUpTo("API_KEY_CACHE_TTL", 5*time.Second, time.Minute),
		SegmentComputeEvery:      r.duration("SEGMENT_COMPUTE_INTERVAL", 60*time.Second),
		LiveSegmentTick:          r.duration("LIVE_SEGMENT_TICK", time.Minute),
		LiveSegmentReconcile:     r.duration("LIVE_SEGMENT_RECONCILE", 10*time.Minute),
		SendMaxAttempts:          r.positiveInt("SEND_MAX_ATTEMPTS", 5),
		SendClaimTimeout:         r.duration("SEND_CLAIM_TIMEOUT", 5*time.Minute),
		SendAttemptTimeout:       r.duration("SEND_ATTEMPT_TIMEOUT", 2*time.Minute),
		ProviderTimeout:          r.duration("PROVIDER_TIMEOUT", 30*time.Second),
		ProviderRatePerSecond:    r.nonNegativeInt("PROVIDER_RATE_PER_SECOND", 0),
		DestinationLimits:        r.limits("DESTINATION_LIMITS"),
		WebhookRetrySchedule: r.durations("WEBHOOK_RETRY_SCHEDULE", []time.Duration{5 * time.Second, 5 * time.Minute,
			30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}),
		WebhookAllowPrivateTargets: r.boolean("WEBHOOK_ALLOW_PRIVATE_TARGETS", false),
		DomainCheckInterval:        r.duration("DOMAIN_CHECK_INTERVAL", 10*time.Minute),
		RetentionInterval:          r.duration("RETENTION_INTERVAL", 24*time.Hour),
		ArchiveDir:                 r.str("ARCHIVE_DIR", "./var/archive"),
		PauseMinSample:             r.positiveInt("PAUSE_MIN_SAMPLE", 500),
		PlanFreeContacts:           r.positiveInt("PLAN_FREE_CONTACTS", 1000),
		PlanFreeTemplates:          r.positiveInt("PLAN_FREE_TEMPLATES", 100),
		PlanFreeSequences:          r.positiveInt("PLAN_FREE_SEQUENCES", 20),
		RenderMaxLoopIterations:    r.positiveInt("RENDER_MAX_LOOP_ITERATIONS", 100_000),
		RenderMaxStringBytes:       r.positiveInt("RENDER_MAX_STRING_BYTES", 10<<20),
		RenderMaxOutputBytes:       r.positiveInt("RENDER_MAX_OUTPUT_BYTES", 10<<20),
		RenderMaxTime:              r.duration("RENDER_MAX_TIME", 2*time.Second),
		IngestBatchMax:             r.intUpTo("INGEST_BATCH_MAX", 100, 1000),
		IngestBatchWait:            r.durationUpTo("INGEST_BATCH_WAIT", 2*time.Millisecond, 100*time.Millisecond),
		IngestQueue:                r.intUpTo("INGEST_QUEUE", 1000, 100_000),
		IngestWriters:              r.intUpTo("INGEST_WRITERS", 2, 64),
		ImportMaxRunning:           r.intUpTo("IMPORT_MAX_RUNNING", 2, 1000),
		ImportMaxUploads:           r.intUpTo("IMPORT_MAX_UPLOADS", 8, 1000),
		ImportUploadTimeout:        r.duration("IMPORT_UPLOAD_TIMEOUT", 10*time.Minute),
		ImportSpoolDir:             r.str("IMPORT_SPOOL_DIR", ""),
		ImportDBConns:              r.intUpTo("IMPORT_DB_CONNS", 4, 64),
	}
	// An upload holds its tenant's place while it lasts: an hour bounds
	// how long one client may keep it.
	if c.ImportUploadTimeout > time.Hour {
		r.fail("IMPORT_UPLOAD_TIMEOUT", fmt.Sprintf("must be at most 1h, got %v", c.ImportUploadTimeout))
	}
	c.Providers, c.TransactionalProviders, c.MarketingProviders = r.pool(c.EmailProvider)
	if c.SESRegion == "" && slices.Contains(c.Providers, "ses") {
		r.fail("SES_REGION", "is required when the pool names ses")
	}
	if len(c.SESSNSCertHosts) == 0 && c.SESRegion != "" {
		c.SESSNSCertHosts = []string{"sns." + c.SESRegion + ".amazonaws.com"}
	}
	// Tracking links are signed by whichever process rendered the message
	// and checked by the api: both must share the key, so a real provider
	// needs it set. Only the outbox (development) has a fixed one.
	switch s := r.str("TRACKING_SECRET", ""); {
	case s != "":
		c.TrackingSecret = []byte(s)
	case slices.Equal(c.Providers, []string{"outbox"}):
		c.TrackingSecret = []byte(DevTrackingSecret)
		c.TrackingSecretGenerated = true
	default:
		r.fail("TRACKING_SECRET", "is required with providers "+strings.Join(c.Providers, ",")+
			" (api and worker must share it: tracking and unsubscribe links are signed with it)")
	}
	if s := r.str("CURSOR_SECRET", ""); s != "" {
		if len(s) < minCursorSecret {
			r.fail("CURSOR_SECRET", fmt.Sprintf("must be at least %d characters", minCursorSecret))
		}
		c.CursorSecret = []byte(s)
	}
	if c.RedisCluster {
		// A cluster has one database; a path naming another would be
		// ignored silently.
		if _, err := redis.ParseClusterURL(c.RedisURL); err != nil {
			r.fail("REDIS_URL", "must be a Redis Cluster URL with REDIS_CLUSTER=true (redis://host:port?addr=host2:port2&addr=host3:port3): "+err.Error())
		} else if u, _ := url.Parse(c.RedisURL); u.Path != "" && u.Path != "/" && u.Path != "/0" {
			r.fail("REDIS_URL", "names database "+strings.TrimPrefix(u.Path, "/")+": a Redis Cluster has only database 0")
		}
	}
	// A claim is taken back as its worker's only after the longest life of
	// the attempt that holds it has ended: the attempt itself
	// (SEND_ATTEMPT_TIMEOUT: its rate waits, records and provider calls)
	// and the writes after the provider's answers (SettleAllowance). A
	// shorter timeout would let the sweep hand a step to a second worker
	// while the first still talks to the provider (ADDENDUM 19). An attempt
	// shorter than one provider call could never send.
	if c.SendAttemptTimeout > 0 && c.ProviderTimeout > 0 && c.SendAttemptTimeout < c.ProviderTimeout {
		r.fail("SEND_ATTEMPT_TIMEOUT", fmt.Sprintf("must be at least PROVIDER_TIMEOUT (%v), got %v",
			c.ProviderTimeout, c.SendAttemptTimeout))
	}
	if life := c.SendAttemptTimeout + SettleAllowance; c.SendClaimTimeout > 0 && c.SendClaimTimeout < life {
		r.fail("SEND_CLAIM_TIMEOUT", fmt.Sprintf("must be at least the longest life of one send attempt, "+
			"SEND_ATTEMPT_TIMEOUT (%v) + %v for the writes after the provider's answer = %v; got %v",
			c.SendAttemptTimeout, SettleAllowance, life, c.SendClaimTimeout))
	}
	if c.SMTPURL != "" {
		if u, err := url.Parse(c.SMTPURL); err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Host == "" {
			r.fail("SMTP_URL", "must look like smtp://user:pass@host:port, got "+RedactURL(c.SMTPURL))
		}
	}
	if c.SendgridWebhookPublicKey != "" {
		if _, err := decodeBase64(c.SendgridWebhookPublicKey); err != nil {
			r.fail("SENDGRID_WEBHOOK_PUBLIC_KEY", "must be base64 (DER ECDSA P-256 public key)")
		}
	}
	if c.DashboardOIDCIssuer != "" {
		if u, err := url.Parse(c.DashboardOIDCIssuer); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.fail("DASHBOARD_OIDC_ISSUER", "must be an http(s) URL")
		}
		// Without an audience any token the issuer signed for another
		// application would open a session here.
		if c.DashboardOIDCAudience == "" {
			r.fail("DASHBOARD_OIDC_AUDIENCE", "is required with DASHBOARD_OIDC_ISSUER (the client id the issuer puts in aud)")
		}
	}
	if len(r.errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %s", strings.Join(r.errs, "; "))
	}
	return c, nil
}

// SettleAllowance is what a send attempt may still take after its deadline:
// the writes that settle the provider's answers (delivery bounds them to
// 15 s, a test ties the two) and some clock skew between processes and
// PostgreSQL, whose clock stamps claims.
const SettleAllowance = 20 * time.Second

// DevTrackingSecret is the TRACKING_SECRET of development with the outbox
// provider when none is set: fixed, so the api and the worker agree and
// links survive restarts, and never used with a real provider.
const DevTrackingSecret = "tidings-development-tracking-secret-not-for-production"

type reader struct {
	lookup func(string) (string, bool)
	errs   []string
}

func (r *reader) fail(name, msg string) { r.errs = append(r.errs, name+" "+msg) }

func (r *reader) limits(name string) []throttle.Limit {
	l, err := throttle.ParseLimits(r.str(name, ""))
	if err != nil {
		r.errs = append(r.errs, err.Error())
	}
	return l
}

func (r *reader) str(name, def string) string {
	if v, ok := r.lookup(name); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	return def
}

func (r *reader) addr(name, def string) string {
	v := r.str(name, def)
	if _, _, err := net.SplitHostPort(v); err != nil {
		r.fail(name, fmt.Sprintf("must be host:port or :port, got %q", v))
	}
	return v
}

func (r *reader) hostPort(name, def string) string {
	v := r.str(name, def)
	if v == "" {
		return v
	}
	if h, p, err := net.SplitHostPort(v); err != nil || h == "" || p == "" {
		r.fail(name, fmt.Sprintf("must be host:port, got %q", v))
	}
	return v
}

// url reads a URL; a connection string's password never reaches the
// message (RedactURL).
// optionalURL is url for a variable without a default: unset is "".
func (r *reader) optionalURL(name string, schemes ...string) string {
	if r.str(name, "") == "" {
		return ""
	}
	return r.url(name, "", schemes...)
}

func (r *reader) url(name, def string, schemes ...string) string {
	v := r.str(name, def)
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		r.fail(name, fmt.Sprintf("must be a URL, got %q", RedactURL(v)))
		return v
	}
	for _, s := range schemes {
		if u.Scheme == s {
			return v
		}
	}
	r.fail(name, fmt.Sprintf("must use scheme %s, got %q", strings.Join(schemes, " or "), u.Scheme))
	return v
}

func (r *reader) oneOf(name, def string, allowed ...string) string {
	v := r.str(name, def)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, fmt.Sprintf("must be one of %s, got %q", strings.Join(allowed, ", "), v))
	return v
}

func (r *reader) positiveInt(name string, def int) int {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		r.fail(name, fmt.Sprintf("must be a positive integer, got %q", v))
		return def
	}
	return n
}

// intUpTo reads an integer within 1-max.
func (r *reader) intUpTo(name string, def, max int) int {
	n := r.positiveInt(name, def)
	if n > max {
		r.fail(name, fmt.Sprintf("must be at most %d, got %d", max, n))
		return def
	}
	return n
}

func (r *reader) nonNegativeInt(name string, def int) int {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		r.fail(name, fmt.Sprintf("must be an integer, 0 or more, got %q", v))
		return def
	}
	return n
}

func (r *reader) boolean(name string, def bool) bool {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		r.fail(name, fmt.Sprintf("must be true or false, got %q", v))
		return def
	}
	return b
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		r.fail(name, fmt.Sprintf("must be a positive duration such as 60s or 10m, got %q", v))
		return def
	}
	return d
}

// durations reads a comma-separated list of positive durations (at most
// 20).
func (r *reader) durations(name string, def []time.Duration) []time.Duration {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	var out []time.Duration
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			r.fail(name, fmt.Sprintf("must be a comma-separated list of positive durations such as 5s,5m,30m, got %q", v))
			return def
		}
		out = append(out, d)
	}
	if len(out) > 20 {
		r.fail(name, "must list at most 20 waits")
		return def
	}
	return out
}

// durationUpTo reads a duration within 0-max; 0 is allowed (it disables
// what the duration is for), max keeps a bound on staleness meaningful.
func (r *reader) durationUpTo(name string, def, max time.Duration) time.Duration {
	v, ok := r.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 || d > max {
		r.fail(name, fmt.Sprintf("must be a duration within 0s-%s, got %q", max, v))
		return def
	}
	return d
}

// splitList splits a comma-separated value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// pool reads PROVIDERS and the two streams' lists. PROVIDERS wins over
// EMAIL_PROVIDER; without it EMAIL_PROVIDER is a pool of one. A stream may
// name only providers of the pool, each once, in its own order.
func (r *reader) pool(emailProvider string) (all, transactional, marketing []string) {
	all = splitList(r.str("PROVIDERS", ""))
	if len(all) == 0 {
		all = []string{emailProvider}
	}
	r.providerList("PROVIDERS", all, ProviderNames)
	transactional = splitList(r.str("TRANSACTIONAL_PROVIDERS", ""))
	if len(transactional) == 0 {
		transactional = all
	}
	r.providerList("TRANSACTIONAL_PROVIDERS", transactional, all)
	marketing = splitList(r.str("MARKETING_PROVIDERS", ""))
	if len(marketing) == 0 {
		marketing = all
	}
	r.providerList("MARKETING_PROVIDERS", marketing, all)
	return all, transactional, marketing
}

func (r *reader) providerList(name string, list, allowed []string) {
	seen := map[string]bool{}
	for _, p := range list {
		switch {
		case !slices.Contains(allowed, p):
			r.fail(name, fmt.Sprintf("names %q, which is not one of %s", p, strings.Join(allowed, ", ")))
		case seen[p]:
			r.fail(name, fmt.Sprintf("names %q twice", p))
		}
		seen[p] = true
	}
}
