package sestest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS signature version 1
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/sesevents"
)

// SNS signs notifications as Amazon SNS does, with its own RSA key and
// certificate, served (with the subscription confirmation URL) by a local
// TLS server: give Host as SES_SNS_CERT_HOSTS and Client as the
// verifier's HTTPS client.
type SNS struct {
	Server    *httptest.Server
	key       *rsa.PrivateKey
	certPEM   []byte
	seq       atomic.Int64
	confirmed atomic.Int64
	certGets  atomic.Int64
	// TopicArn is the topic the notifications come from.
	TopicArn string
}

// CertPath is where the server serves the signing certificate.
const CertPath = "/SimpleNotificationService-fake.pem"

// NewSNS makes a key and a self-signed certificate and starts the TLS
// server, closed at the test's end.
func NewSNS(t testing.TB) *SNS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.fake.amazonaws.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	s := &SNS{key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		TopicArn: "arn:aws:sns:eu-west-1:123456789012:tidings-ses-events"}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == CertPath:
			s.certGets.Add(1)
			_, _ = w.Write(s.certPEM)
		case r.URL.Query().Get("Action") == "ConfirmSubscription":
			s.confirmed.Add(1)
			_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Server.Close)
	return s
}

// Host is the server's host:port.
func (s *SNS) Host() string { return strings.TrimPrefix(s.Server.URL, "https://") }

// Client trusts the server's TLS certificate.
func (s *SNS) Client() *http.Client { return s.Server.Client() }

// Confirmed counts subscription confirmations received.
func (s *SNS) Confirmed() int { return int(s.confirmed.Load()) }

// CertFetches counts fetches of the signing certificate.
func (s *SNS) CertFetches() int { return int(s.certGets.Load()) }

// Sign fills e's signature fields with version "1" (SHA1withRSA) or "2"
// (SHA256withRSA).
func (s *SNS) Sign(e *sesevents.Envelope, version string) {
	e.SignatureVersion = version
	e.SigningCertURL = s.Server.URL + CertPath
	text := sesevents.StringToSign(e)
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum(text) //nolint:gosec
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256(text)
		sig, err = rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, d[:])
	}
	if err != nil {
		panic(err)
	}
	e.Signature = base64.StdEncoding.EncodeToString(sig)
}

// Notification is a signed SNS notification carrying message (an SES
// event's JSON), with a fresh MessageId.
func (s *SNS) Notification(message []byte, version string) *sesevents.Envelope {
	e := &sesevents.Envelope{Type: sesevents.TypeNotification, MessageID: fmt.Sprintf("sns-%d-%d", time.Now().UnixNano(), s.seq.Add(1)),
		TopicArn: s.TopicArn, Message: string(message), Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}
	s.Sign(e, version)
	return e
}

// Confirmation is a signed SubscriptionConfirmation whose SubscribeURL is
// on the server.
func (s *SNS) Confirmation(version string) *sesevents.Envelope {
	e := &sesevents.Envelope{Type: sesevents.TypeSubscriptionConfirmation, MessageID: fmt.Sprintf("sub-%d", s.seq.Add(1)),
		Token: "tok", TopicArn: s.TopicArn, Message: "You have chosen to subscribe to the topic.",
		SubscribeURL: s.Server.URL + "/?Action=ConfirmSubscription&Token=tok",
		Timestamp:    time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}
	s.Sign(e, version)
	return e
}

// Body is e as SNS posts it.
func Body(e *sesevents.Envelope) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	return b
}

// Event is an SES event-publishing JSON of eventType for a message tagged
// with sendID and tenantID; bounceType is used for Bounce.
func Event(eventType, sendID, tenantID, email, bounceType string, at time.Time) []byte {
	ts := at.UTC().Format("2006-01-02T15:04:05.000Z")
	m := map[string]any{
		"eventType": eventType,
		"mail": map[string]any{"timestamp": ts, "messageId": "0100018fake-" + sendID, "destination": []string{email},
			"tags": map[string][]string{"send_id": {sendID}, "tenant_id": {tenantID}, "ses:configuration-set": {"tidings"}}},
	}
	switch eventType {
	case "Delivery":
		m["delivery"] = map[string]any{"timestamp": ts, "recipients": []string{email}}
	case "Bounce":
		m["bounce"] = map[string]any{"bounceType": bounceType, "bounceSubType": "General", "timestamp": ts,
			"bouncedRecipients": []map[string]string{{"emailAddress": email, "diagnosticCode": "smtp; 550 5.1.1 user unknown"}}}
	case "Complaint":
		m["complaint"] = map[string]any{"timestamp": ts, "complainedRecipients": []map[string]string{{"emailAddress": email}}}
	case "Open":
		m["open"] = map[string]any{"timestamp": ts, "userAgent": "Mozilla/5.0", "ipAddress": "192.0.2.1"}
	case "Click":
		m["click"] = map[string]any{"timestamp": ts, "link": "https://acme.test/", "ipAddress": "192.0.2.1"}
	}
	b, _ := json.Marshal(m)
	return b
}
