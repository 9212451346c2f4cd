package sendgridevents

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"

	"tidings/internal/sendgridevents/sgtest"
)

type verifyBundle struct {
	priv     *ecdsa.PrivateKey
	verifier *Verifier
	now      time.Time
}

func setupVerify(t *testing.T) verifyBundle {
	t.Helper()
	priv, pub, err := sgtest.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return verifyBundle{priv: priv, verifier: v, now: time.Unix(1700000000, 0)}
}

func (b verifyBundle) sign(t *testing.T, body []byte, at time.Time) (sig, ts string) {
	t.Helper()
	ts = strconv.FormatInt(at.Unix(), 10)
	sig, err := sgtest.Sign(b.priv, body, ts)
	if err != nil {
		t.Fatal(err)
	}
	return sig, ts
}

func TestVerify(t *testing.T) {
	t.Parallel()
	b := setupVerify(t)
	body := []byte(sampleBatch)
	goodSig, goodTS := b.sign(t, body, b.now)
	otherKey, _, _ := sgtest.NewKey()
	otherSig, _ := sgtest.Sign(otherKey, body, goodTS)
	oldSig, oldTS := b.sign(t, body, b.now.Add(-DefaultMaxAge-time.Second))
	edgeSig, edgeTS := b.sign(t, body, b.now.Add(-DefaultMaxAge))
	futureSig, futureTS := b.sign(t, body, b.now.Add(DefaultMaxFuture+time.Second))
	tampered := append([]byte(nil), body...)
	tampered[10] ^= 1
	rawSig, _ := base64.StdEncoding.DecodeString(goodSig)

	tests := []struct {
		desc    string
		body    []byte
		sig, ts string
		want    error
	}{
		{desc: "good", body: body, sig: goodSig, ts: goodTS},
		{desc: "at the edge of the window", body: body, sig: edgeSig, ts: edgeTS},
		{desc: "tampered body", body: tampered, sig: goodSig, ts: goodTS, want: ErrBadSignature},
		{desc: "empty body", body: nil, sig: goodSig, ts: goodTS, want: ErrBadSignature},
		{desc: "other timestamp, same signature", body: body, sig: goodSig, ts: strconv.FormatInt(b.now.Unix()-1, 10), want: ErrBadSignature},
		{desc: "wrong key", body: body, sig: otherSig, ts: goodTS, want: ErrBadSignature},
		{desc: "stale", body: body, sig: oldSig, ts: oldTS, want: ErrStale},
		{desc: "future", body: body, sig: futureSig, ts: futureTS, want: ErrStale},
		{desc: "no signature", body: body, sig: "", ts: goodTS, want: ErrBadSignature},
		{desc: "no timestamp", body: body, sig: goodSig, ts: "", want: ErrBadSignature},
		{desc: "timestamp not a number", body: body, sig: goodSig, ts: "17e8", want: ErrBadSignature},
		{desc: "timestamp negative", body: body, sig: goodSig, ts: "-1", want: ErrBadSignature},
		{desc: "signature not base64", body: body, sig: "%%%", ts: goodTS, want: ErrBadSignature},
		{desc: "signature not ASN.1", body: body, sig: base64.StdEncoding.EncodeToString([]byte("nonsense")), ts: goodTS, want: ErrBadSignature},
		{desc: "signature truncated", body: body, sig: base64.StdEncoding.EncodeToString(rawSig[:len(rawSig)-1]), ts: goodTS, want: ErrBadSignature},
		{desc: "signature huge", body: body, sig: base64.StdEncoding.EncodeToString(make([]byte, 4096)), ts: goodTS, want: ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if err := b.verifier.Verify(tt.body, tt.sig, tt.ts, b.now); !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyHeadersHelper(t *testing.T) {
	t.Parallel()
	b := setupVerify(t)
	body := []byte(`[]`)
	h, err := sgtest.Headers(b.priv, body, b.now)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.verifier.Verify(body, h[SignatureHeader], h[TimestampHeader], b.now); err != nil {
		t.Fatal(err)
	}
}

func TestNewVerifier(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	_, good, _ := sgtest.NewKey()
	tests := []struct {
		desc    string
		key     string
		wantErr bool
	}{
		{desc: "P-256", key: good},
		{desc: "P-256 with newline", key: good + "\n"},
		{desc: "empty", key: "", wantErr: true},
		{desc: "not base64", key: "%%%", wantErr: true},
		{desc: "not DER", key: base64.StdEncoding.EncodeToString([]byte("hello")), wantErr: true},
		{desc: "RSA", key: base64.StdEncoding.EncodeToString(rsaDER), wantErr: true},
		{desc: "P-384", key: base64.StdEncoding.EncodeToString(p384DER), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := NewVerifier(tt.key); (err != nil) != tt.wantErr {
				t.Fatalf("NewVerifier err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
