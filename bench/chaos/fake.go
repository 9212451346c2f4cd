package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// fakeSendGrid is the provider of the run: SendGrid's Mail Send endpoint
// answering 202 with an X-Message-Id after a few milliseconds (so a killed
// worker is often caught mid-send), counting every send_id custom arg it
// accepts. It lives in this process, which no fault touches, so its count
// is the provider's truth at the end. Some requests (provider faults, 6%)
// get no answer: held past PROVIDER_TIMEOUT, or the connection cut after
// the body was read, half of them after the message was taken (its answer
// lost), half before: the ledger must leave each in doubt, never sent
// twice.
type fakeSendGrid struct {
	srv   *http.Server
	mu    sync.Mutex
	seen  map[string]int
	total atomic.Int64
	seq   atomic.Int64
	// faults counts the requests left unanswered.
	faults atomic.Int64
}

func newFake() *fakeSendGrid { return &fakeSendGrid{seen: map[string]int{}} }

func (f *fakeSendGrid) start() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/mail/send", f.send)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(l) }()
	return "http://" + l.Addr().String(), nil
}

func (f *fakeSendGrid) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
}

func (f *fakeSendGrid) send(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	var body struct {
		CustomArgs       map[string]string `json:"custom_args"`
		Personalizations []struct {
			CustomArgs map[string]string `json:"custom_args"`
		} `json:"personalizations"`
	}
	if err != nil || json.Unmarshal(raw, &body) != nil {
		http.Error(w, `{"errors":[{"message":"bad request"}]}`, http.StatusBadRequest)
		return
	}
	id := body.CustomArgs["send_id"]
	for _, p := range body.Personalizations {
		if v := p.CustomArgs["send_id"]; v != "" {
			id = v
		}
	}
	if id == "" {
		http.Error(w, `{"errors":[{"message":"no send_id custom arg"}]}`, http.StatusBadRequest)
		return
	}
	time.Sleep(20 * time.Millisecond)
	roll := rand.IntN(100)
	if roll >= 6 || roll%2 == 0 {
		f.take(id)
	}
	switch {
	case roll < 3:
		f.faults.Add(1)
		<-r.Context().Done() // no answer: the client gives up at PROVIDER_TIMEOUT
		return
	case roll < 6:
		f.faults.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
			}
		}
		return
	}
	w.Header().Set("X-Message-Id", fmt.Sprintf("chaos-%d", f.seq.Add(1)))
	w.WriteHeader(http.StatusAccepted)
}

// take counts a message the provider accepted.
func (f *fakeSendGrid) take(id string) {
	f.mu.Lock()
	f.seen[id]++
	f.mu.Unlock()
	f.total.Add(1)
}

// snapshot is how many times each send_id was accepted.
func (f *fakeSendGrid) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.seen))
	for k, v := range f.seen {
		out[k] = v
	}
	return out
}

// receiver is the tenant's outbound webhook endpoint: it counts each
// webhook-id it is sent and fails one delivery in ten (500), so the
// retries run under the faults too.
type receiver struct {
	srv  *http.Server
	url  string
	mu   sync.Mutex
	seen map[string]int
	n    atomic.Int64
}

func newReceiver() *receiver { return &receiver{seen: map[string]int{}} }

func (h *receiver) start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h.url = "http://" + ln.Addr().String() + "/hook"
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if h.n.Add(1)%10 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		h.mu.Lock()
		h.seen[r.Header.Get("webhook-id")]++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return nil
}

func (h *receiver) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.seen))
	for k, v := range h.seen {
		out[k] = v
	}
	return out
}
