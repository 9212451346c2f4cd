package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// is the provider's truth at the end.
type fakeSendGrid struct {
	srv   *http.Server
	mu    sync.Mutex
	seen  map[string]int
	total atomic.Int64
	seq   atomic.Int64
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
	f.mu.Lock()
	f.seen[id]++
	f.mu.Unlock()
	f.total.Add(1)
	w.Header().Set("X-Message-Id", fmt.Sprintf("chaos-%d", f.seq.Add(1)))
	w.WriteHeader(http.StatusAccepted)
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
