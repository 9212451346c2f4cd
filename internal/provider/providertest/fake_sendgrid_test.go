package providertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
)

const validBody = `{"from":{"email":"a@acme.example"},"subject":"s","personalizations":[{"to":[{"email":"b@example.com"}]}],"content":[{"type":"text/plain","value":"t"},{"type":"text/html","value":"<p>h</p>"}],"custom_args":{"send_id":"snd_1"}}`

type answer struct {
	status     int
	messageID  string
	retryAfter string
	errors     []struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
	}
}

func post(t *testing.T, url, auth, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v3/mail/send", bytes.NewBufferString(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, messageID: resp.Header.Get("X-Message-Id"), retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode >= 400 {
		var doc struct {
			Errors []struct {
				Message string  `json:"message"`
				Field   *string `json:"field"`
			} `json:"errors"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("error body: %v", err)
		}
		a.errors = doc.Errors
	}
	return a
}

func TestFakeSendGridAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc       string
		auth       string
		body       string
		wantStatus int
		wantField  string
	}{
		{desc: "accepted", auth: "Bearer k", body: validBody, wantStatus: 202},
		{desc: "no key", auth: "", body: validBody, wantStatus: 401},
		{desc: "not JSON", auth: "Bearer k", body: "{", wantStatus: 400},
		{desc: "no personalizations", auth: "Bearer k", body: `{"from":{"email":"a@acme.example"},"subject":"s","content":[{"type":"text/plain","value":"t"}]}`, wantStatus: 400, wantField: "personalizations"},
		{desc: "no from", auth: "Bearer k", body: `{"subject":"s","personalizations":[{"to":[{"email":"b@example.com"}]}],"content":[{"type":"text/plain","value":"t"}]}`, wantStatus: 400, wantField: "from.email"},
		{desc: "html before text", auth: "Bearer k", body: `{"from":{"email":"a@acme.example"},"subject":"s","personalizations":[{"to":[{"email":"b@example.com"}]}],"content":[{"type":"text/html","value":"h"},{"type":"text/plain","value":"t"}]}`, wantStatus: 400, wantField: "content"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			f := providertest.NewSendGrid(t)
			a := post(t, f.URL, tt.auth, tt.body)
			if a.status != tt.wantStatus {
				t.Fatalf("status %d, want %d", a.status, tt.wantStatus)
			}
			if tt.wantStatus == 202 {
				msgs := f.Messages()
				if a.messageID == "" || len(msgs) != 1 || msgs[0].MessageID != a.messageID || msgs[0].Mail.CustomArgs["send_id"] != "snd_1" {
					t.Errorf("X-Message-Id %q, recorded %+v", a.messageID, msgs)
				}
				return
			}
			if len(a.errors) != 1 || a.errors[0].Message == "" {
				t.Fatalf("errors %+v, want SendGrid's error document", a.errors)
			}
			if tt.wantField != "" && (a.errors[0].Field == nil || *a.errors[0].Field != tt.wantField) {
				t.Errorf("field %v, want %q", a.errors[0].Field, tt.wantField)
			}
			if f.Count() != 0 {
				t.Errorf("Count %d after a refusal", f.Count())
			}
		})
	}
}

func TestFakeSendGridFailNext(t *testing.T) {
	t.Parallel()
	f := providertest.NewSendGrid(t)
	f.FailNext(2, 429, 2500*time.Millisecond)
	f.FailNext(1, 500, 0)
	for i, want := range []struct {
		status     int
		retryAfter string
	}{{429, "3"}, {429, "3"}, {500, ""}, {202, ""}} {
		a := post(t, f.URL, "Bearer k", validBody)
		if a.status != want.status || a.retryAfter != want.retryAfter {
			t.Errorf("request %d: status %d Retry-After %q, want %d %q", i, a.status, a.retryAfter, want.status, want.retryAfter)
		}
	}
	if f.Requests() != 4 || f.Count() != 1 {
		t.Errorf("Requests %d Count %d, want 4 and 1", f.Requests(), f.Count())
	}
	f.Reset()
	if f.Requests() != 0 || f.Count() != 0 || len(f.Messages()) != 0 {
		t.Error("Reset left state behind")
	}
}

func TestFakeSendGridConcurrentUniqueIDs(t *testing.T) {
	t.Parallel()
	f := providertest.NewSendGrid(t)
	cfg := &config.Config{}
	f.Configure(cfg)
	p, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var mu sync.Mutex
	ids := map[string]bool{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, err := p.Send(context.Background(), message(fmt.Sprintf("snd_%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[id] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ids) != n || f.Count() != n || len(f.Messages()) != n {
		t.Errorf("%d unique ids, Count %d, %d recorded; want %d", len(ids), f.Count(), len(f.Messages()), n)
	}
}

func TestFakeSendGridKeepMessagesOff(t *testing.T) {
	t.Parallel()
	f := providertest.NewSendGrid(t)
	f.KeepMessages(false)
	post(t, f.URL, "Bearer k", validBody)
	if f.Count() != 1 || len(f.Messages()) != 0 {
		t.Errorf("Count %d, recorded %d; want 1 and 0", f.Count(), len(f.Messages()))
	}
}

func message(sendID string) provider.Message {
	return provider.Message{
		SendID: sendID, TenantID: "ten_1",
		From: provider.Address{Name: "Acme", Address: "news@acme.example"},
		To:   "ada@example.com", Subject: "Hello",
		HTML: "<p>Hello <a href=\"https://t.example/t/c/x\">Ada</a></p>" + string(bytes.Repeat([]byte("<p>lorem ipsum dolor sit amet</p>"), 60)),
		Text: "Hello Ada" + string(bytes.Repeat([]byte("lorem ipsum dolor sit amet\n"), 60)),
		Headers: []provider.Header{
			{Name: provider.HeaderListUnsubscribe, Value: "<https://t.example/t/u/tok>"},
			{Name: provider.HeaderListUnsubscribePost, Value: provider.ListUnsubscribeOneClick},
		},
	}
}

// BenchmarkSendGridClientToFake measures the sendgrid provider (the real
// sendgrid-go client over loopback HTTP) against the fake, with recording
// off: the ceiling a load test through the fake can reach on this machine.
func BenchmarkSendGridClientToFake(b *testing.B) {
	f := providertest.NewSendGrid(b)
	f.KeepMessages(false)
	cfg := &config.Config{}
	f.Configure(cfg)
	p, err := provider.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	msg := message("snd_bench")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Send(context.Background(), msg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
}

func TestFakeSendGridTrustBodies(t *testing.T) {
	t.Parallel()
	f := providertest.NewSendGrid(t)
	f.KeepMessages(false)
	if code := post(t, f.URL, "Bearer k", `{"not":"mail"}`).status; code != http.StatusBadRequest {
		t.Fatalf("an unchecked fake's bad body answered %d, want 400", code)
	}
	f.TrustBodies(true)
	if code := post(t, f.URL, "Bearer k", `{"not":"mail"}`).status; code != http.StatusAccepted || f.Count() != 1 {
		t.Errorf("a trusting fake answered %d (Count %d), want 202 and 1", code, f.Count())
	}
	if code := post(t, f.URL, "", validBody).status; code != http.StatusUnauthorized {
		t.Errorf("a trusting fake took a request without a key: %d", code)
	}
	// Recording on, it decodes and checks whatever it was told.
	f.KeepMessages(true)
	if code := post(t, f.URL, "Bearer k", `{"not":"mail"}`).status; code != http.StatusBadRequest {
		t.Errorf("a recording fake answered %d to a bad body, want 400", code)
	}
}
