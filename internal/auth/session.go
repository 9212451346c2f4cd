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
// secret (development, tests) and/or RS256/ES256 against an OIDC issuer's
// JWKS (production).
type SessionVerifier struct {
	secret   []byte
	issuer   string
	audience string

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewSessionVerifier builds a verifier; empty secret or issuer disables
// that method.
func NewSessionVerifier(secret, issuer, audience string) *SessionVerifier {
	return &SessionVerifier{secret: []byte(secret), issuer: issuer, audience: audience}
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
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
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
	cfg := &oidc.Config{
		ClientID:             v.audience,
		SkipClientIDCheck:    v.audience == "",
		SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256},
	}
	// The key set must outlive the request that happened to discover it.
	v.verifier = p.VerifierContext(context.WithoutCancel(ctx), cfg)
	return v.verifier, nil
}

// MintHS256 signs a development session token; used by cmd/devtoken and tests.
func MintHS256(secret, userID, orgID string, ttl time.Duration) (string, error) {
	now := time.Now()
	c := claims{OrgID: orgID, RegisteredClaims: jwt.RegisteredClaims{
		Subject: userID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
}
