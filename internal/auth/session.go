package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
)

// Session is a verified dashboard session.
type Session struct {
	UserID string
	OrgID  string
}

// ErrInvalidSession covers expired, badly signed and incomplete tokens.
var ErrInvalidSession = errors.New("invalid session token")

// SessionVerifier checks dashboard session tokens: HS256 with a shared
// secret and/or RS256/ES256 against an OIDC issuer's JWKS (production).
// HS256 tokens must carry the configured iss and aud (WithHS256Claims);
// only DEV_MODE runs HS256 without them (config.Secure).
type SessionVerifier struct {
	secret []byte
	// hsIssuer and hsAudience, when set, are required in HS256 tokens.
	hsIssuer, hsAudience string
	issuer               string
	audience             string

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// Option changes a SessionVerifier.
type Option func(*SessionVerifier)

// WithHS256Claims requires iss and aud in HS256 tokens
// (DASHBOARD_JWT_ISSUER, DASHBOARD_JWT_AUDIENCE); empty values require
// nothing.
func WithHS256Claims(issuer, audience string) Option {
	return func(v *SessionVerifier) { v.hsIssuer, v.hsAudience = issuer, audience }
}

// NewSessionVerifier builds a verifier; empty secret or issuer disables
// that method. OIDC tokens must name audience in aud: without one, no
// OIDC token is accepted.
func NewSessionVerifier(secret, issuer, audience string, opts ...Option) *SessionVerifier {
	v := &SessionVerifier{secret: []byte(secret), issuer: issuer, audience: audience}
	for _, o := range opts {
		o(v)
	}
	return v
}

type claims struct {
	OrgID string `json:"org_id"`
	jwt.RegisteredClaims
}

// Verify returns the session a token stands for.
func (v *SessionVerifier) Verify(ctx context.Context, token string) (Session, error) {
	alg, err := headerAlg(token)
	if err != nil {
		return Session{}, ErrInvalidSession
	}
	if alg == "HS256" {
		return v.verifyHS256(token)
	}
	if v.issuer == "" {
		return Session{}, ErrInvalidSession
	}
	return v.verifyOIDC(ctx, token)
}

func headerAlg(token string) (string, error) {
	t, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return "", err
	}
	alg, _ := t.Header["alg"].(string)
	return alg, nil
}

func (v *SessionVerifier) verifyHS256(token string) (Session, error) {
	if len(v.secret) == 0 {
		return Session{}, ErrInvalidSession
	}
	var c claims
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()}
	if v.hsIssuer != "" {
		opts = append(opts, jwt.WithIssuer(v.hsIssuer))
	}
	if v.hsAudience != "" {
		opts = append(opts, jwt.WithAudience(v.hsAudience))
	}
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.secret, nil }, opts...)
	if err != nil || c.Subject == "" || c.OrgID == "" {
		return Session{}, ErrInvalidSession
	}
	return Session{UserID: c.Subject, OrgID: c.OrgID}, nil
}

func (v *SessionVerifier) verifyOIDC(ctx context.Context, token string) (Session, error) {
	ver, err := v.oidcVerifier(ctx)
	if err != nil {
		return Session{}, fmt.Errorf("%w: %v", ErrInvalidSession, err)
	}
	idt, err := ver.Verify(ctx, token)
	if err != nil {
		return Session{}, ErrInvalidSession
	}
	var c struct {
		OrgID string `json:"org_id"`
		Exp   *int64 `json:"exp"`
	}
	if err := idt.Claims(&c); err != nil || idt.Subject == "" || c.OrgID == "" || c.Exp == nil {
		return Session{}, ErrInvalidSession
	}
	return Session{UserID: idt.Subject, OrgID: c.OrgID}, nil
}

// oidcVerifier discovers the issuer lazily and retries after a failure, so
// the API starts even while the identity provider is unreachable.
func (v *SessionVerifier) oidcVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, v.issuer)
	if err != nil {
		return nil, err
	}
	// The audience is always checked: an empty one matches no token.
	cfg := &oidc.Config{
		ClientID:             v.audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256},
	}
	// The key set must outlive the request that happened to discover it.
	v.verifier = p.VerifierContext(context.WithoutCancel(ctx), cfg)
	return v.verifier, nil
}

// MintHS256 signs a session token without iss and aud, which only a
// verifier without WithHS256Claims (DEV_MODE) accepts; used by
// benchmarks and tests.
func MintHS256(secret, userID, orgID string, ttl time.Duration) (string, error) {
	return MintHS256Claims(secret, "", "", userID, orgID, ttl)
}

// MintHS256Claims signs a session token with iss and aud (left out when
// empty); used by cmd/devtoken and tests.
func MintHS256Claims(secret, issuer, audience, userID, orgID string, ttl time.Duration) (string, error) {
	now := time.Now()
	c := claims{OrgID: orgID, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: issuer, Subject: userID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	if audience != "" {
		c.Audience = jwt.ClaimStrings{audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
}
