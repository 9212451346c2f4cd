package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// idp is a local OIDC issuer: discovery document plus JWKS with one RSA and
// one EC key.
type idp struct {
	srv *httptest.Server
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := &idp{rsa: rk, ec: ek}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/jwks",
			"authorization_endpoint": p.srv.URL + "/auth", "token_endpoint": p.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{
			map[string]any{"kty": "RSA", "kid": "rsa1", "alg": "RS256", "use": "sig",
				"n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
			map[string]any{"kty": "EC", "kid": "ec1", "alg": "ES256", "use": "sig", "crv": "P-256",
				"x": b64(ek.X.FillBytes(make([]byte, 32))), "y": b64(ek.Y.FillBytes(make([]byte, 32)))},
		}})
	})
	return p
}

func (p *idp) sign(t *testing.T, method jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	var key any = p.rsa
	tok.Header["kid"] = "rsa1"
	if method == jwt.SigningMethodES256 {
		key, tok.Header["kid"] = p.ec, "ec1"
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOIDCSessionTokens(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	v := NewSessionVerifier("", p.srv.URL, "tidings-dashboard")
	exp := time.Now().Add(time.Hour).Unix()
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"iss": p.srv.URL, "aud": "tidings-dashboard", "sub": "user-9", "org_id": "org_oidc", "exp": exp}
	}
	good := p.sign(t, jwt.SigningMethodRS256, base())
	s, err := v.Verify(context.Background(), good)
	if err != nil || s.OrgID != "org_oidc" || s.UserID != "user-9" {
		t.Fatalf("RS256: %+v %v", s, err)
	}
	if s, err := v.Verify(context.Background(), p.sign(t, jwt.SigningMethodES256, base())); err != nil || s.OrgID != "org_oidc" {
		t.Fatalf("ES256: %+v %v", s, err)
	}

	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := jwt.NewWithClaims(jwt.SigningMethodRS256, base())
	forged.Header["kid"] = "rsa1"
	forgedStr, _ := forged.SignedString(otherKey)

	mutate := func(f func(jwt.MapClaims)) string { c := base(); f(c); return p.sign(t, jwt.SigningMethodRS256, c) }
	bad := map[string]string{
		"forged signature": forgedStr,
		"expired":          mutate(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }),
		"no exp":           mutate(func(c jwt.MapClaims) { delete(c, "exp") }),
		"no org_id":        mutate(func(c jwt.MapClaims) { delete(c, "org_id") }),
		"no sub":           mutate(func(c jwt.MapClaims) { delete(c, "sub") }),
		"wrong audience":   mutate(func(c jwt.MapClaims) { c["aud"] = "someone-else" }),
		"wrong issuer":     mutate(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }),
		"HS256 without secret": func() string {
			s, _ := MintHS256("x", "u", "org", time.Hour)
			return s
		}(),
	}
	for desc, tok := range bad {
		if _, err := v.Verify(context.Background(), tok); err == nil {
			t.Errorf("%s: accepted", desc)
		}
	}
}

func TestHS256SessionTokens(t *testing.T) {
	t.Parallel()
	v := NewSessionVerifier("s3cret", "", "")
	tok, _ := MintHS256("s3cret", "u1", "org1", time.Minute)
	if s, err := v.Verify(context.Background(), tok); err != nil || s.OrgID != "org1" || s.UserID != "u1" {
		t.Fatalf("%+v %v", s, err)
	}
	// alg=none and algorithm confusion are refused.
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "u", "org_id": "o", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if _, err := v.Verify(context.Background(), none); err == nil {
		t.Fatal("alg none accepted")
	}
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"sub": "u", "org_id": "o", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("s3cret"))
	if _, err := v.Verify(context.Background(), hs512); err == nil {
		t.Fatal("HS512 accepted")
	}
}

func TestAPIKeyShape(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		k := GenerateKey()
		if !LooksLikeKey(k.Raw) || len(k.Prefix) != 12 || k.Prefix != k.Raw[:12] || seen[k.Raw] {
			t.Fatalf("bad key %q", k.Raw)
		}
		seen[k.Raw] = true
	}
	for _, s := range []string{"", "tdk_", "tdk_short", "xyz_0123456789012345678901234567890123", "tdk_0123456789012345678901234567890!!"} {
		if LooksLikeKey(s) {
			t.Errorf("%q accepted", s)
		}
	}
	if !IsSessionToken("a.b.c") || IsSessionToken("tdk_abc") || IsSessionToken("a.b") {
		t.Error("IsSessionToken")
	}
}

// Without a configured audience the verifier accepts no OIDC token: a
// skipped audience check would let a token the issuer minted for any other
// application open a session (config refuses to start without one too).
func TestOIDCWithoutAudienceAcceptsNothing(t *testing.T) {
	t.Parallel()
	p := newIDP(t)
	v := NewSessionVerifier("", p.srv.URL, "")
	tok := p.sign(t, jwt.SigningMethodRS256, jwt.MapClaims{"iss": p.srv.URL, "aud": "another-application",
		"sub": "user-9", "org_id": "org_oidc", "exp": time.Now().Add(time.Hour).Unix()})
	if s, err := v.Verify(context.Background(), tok); err == nil {
		t.Fatalf("a token for another application opened a session: %+v", s)
	}
}

// With DASHBOARD_JWT_ISSUER and DASHBOARD_JWT_AUDIENCE an HS256 token must
// carry both: a token of another service that shares the secret, or one
// minted without them, opens no session.
func TestHS256IssuerAndAudience(t *testing.T) {
	t.Parallel()
	const secret = "an-hs256-secret-of-32-bytes-or-more"
	v := NewSessionVerifier(secret, "", "", WithHS256Claims("https://tidings.example.com", "tidings-dashboard"))
	good, _ := MintHS256Claims(secret, "https://tidings.example.com", "tidings-dashboard", "u1", "org1", time.Minute)
	if s, err := v.Verify(context.Background(), good); err != nil || s.OrgID != "org1" || s.UserID != "u1" {
		t.Fatalf("%+v %v", s, err)
	}
	bad := map[string][2]string{
		"no iss or aud":  {"", ""},
		"wrong issuer":   {"https://other.example.com", "tidings-dashboard"},
		"wrong audience": {"https://tidings.example.com", "other-app"},
		"no audience":    {"https://tidings.example.com", ""},
		"no issuer":      {"", "tidings-dashboard"},
	}
	for desc, c := range bad {
		tok, _ := MintHS256Claims(secret, c[0], c[1], "u1", "org1", time.Minute)
		if _, err := v.Verify(context.Background(), tok); err == nil {
			t.Errorf("%s: accepted", desc)
		}
	}
}
