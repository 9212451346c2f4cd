package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// fakeSendGrid is the provider of the run: SendGrid's Mail Send endpoint.
// It logs every request it gets (send_id, tenant_id, recipient and the
// unit the body names) with what it answered and whether it took the
// message: the provider's truth the oracle reads. It lives in this
// process, which no fault touches. Its answer to each request is drawn
// from the seed, the unit and how many requests of that unit came before,
// so a run's provider faults are the same for the same seed whatever the
// order requests arrive in (pickAnswer).
type fakeSendGrid struct {
	srv  *http.Server
	seed int64
	mu   sync.Mutex
	log  []Request
	// tries counts the requests of each unit so far.
	tries map[string]int
	seq   atomic.Int64
	// outage: SendGrid refuses everything (fault "provider-outage").
	outage atomic.Bool
}

// record logs a request taken elsewhere (the fake SMTP) or refused by an
// outage, numbered in the one log.
func (f *fakeSendGrid) record(req Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.At.IsZero() {
		req.At = time.Now()
	}
	req.N = int64(len(f.log))
	f.log = append(f.log, req)
}

func newFake(seed int64) *fakeSendGrid { return &fakeSendGrid{seed: seed, tries: map[string]int{}} }

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

// unitRE finds the unit a workload message names in its body.
var unitRE = regexp.MustCompile(`UNIT\[([^\]]+)\]`)

// sendIDRE finds the send id in a body that broke off.
var sendIDRE = regexp.MustCompile(`"send_id":"([^"]+)"`)

// mailBody is the part of a Mail Send body the fake reads.
type mailBody struct {
	CustomArgs       map[string]string `json:"custom_args"`
	Personalizations []struct {
		To []struct {
			Email string `json:"email"`
		} `json:"to"`
		CustomArgs map[string]string `json:"custom_args"`
	} `json:"personalizations"`
	Content []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"content"`
}

// parseMail reads the request's identity from a Mail Send body.
func parseMail(raw []byte) (Request, error) {
	var body mailBody
	if err := json.Unmarshal(raw, &body); err != nil {
		return Request{}, err
	}
	req := Request{SendID: body.CustomArgs["send_id"], TenantID: body.CustomArgs["tenant_id"]}
	for _, p := range body.Personalizations {
		if v := p.CustomArgs["send_id"]; v != "" {
			req.SendID = v
		}
		if len(p.To) > 0 {
			req.To = p.To[0].Email
		}
	}
	for _, c := range body.Content {
		if m := unitRE.FindStringSubmatch(c.Value); m != nil {
			req.Unit = m[1]
			break
		}
	}
	if req.SendID == "" {
		return req, fmt.Errorf("no send_id custom arg")
	}
	return req, nil
}

// answers are the fake's answers with their weights in 100; 202 takes the
// rest. hang, drop-before and drop-after give no answer: the request was
// written, so the sender must leave the record in doubt.
var answers = []struct {
	answer string
	weight int
}{{"429", 3}, {"400", 2}, {"500", 2}, {"503", 2}, {"hang", 3}, {"drop-before", 2}, {"drop-after", 4}}

// pickAnswer draws the answer to the try-th request of unit, and for
// drop-after whether the message was taken before the cut.
func pickAnswer(seed int64, unit string, try int) (string, bool) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%d", seed, unit, try)
	x := h.Sum64()
	roll := int(x % 100)
	for _, a := range answers {
		if roll < a.weight {
			return a.answer, a.answer == "hang" || (a.answer == "drop-after" && (x>>32)%2 == 0)
		}
		roll -= a.weight
	}
	return "202", true
}

func (f *fakeSendGrid) send(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		// The sender died (or cut) mid-request: nothing was taken, but the
		// request is logged as far as it came, so the oracle can tell a
		// record whose request broke off from one never sent at all.
		if m := sendIDRE.FindSubmatch(raw); m != nil {
			f.mu.Lock()
			f.log = append(f.log, Request{N: int64(len(f.log)), At: time.Now(), SendID: string(m[1]), Answer: "incomplete"})
			f.mu.Unlock()
		}
		return
	}
	req, err := parseMail(raw)
	if err != nil {
		http.Error(w, `{"errors":[{"message":"`+err.Error()+`"}]}`, http.StatusBadRequest)
		return
	}
	req.At = time.Now()
	if f.outage.Load() {
		// A provider outage: every message is refused at once (a 5xx
		// before anything is taken), which opens the pool's circuit.
		req.Answer = "outage"
		f.record(req)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"errors":[{"message":"service unavailable (outage)"}]}`, http.StatusServiceUnavailable)
		return
	}
	time.Sleep(20 * time.Millisecond) // a killed worker is often caught mid-send
	f.mu.Lock()
	try := f.tries[req.Unit]
	f.tries[req.Unit]++
	req.Answer, req.Taken = pickAnswer(f.seed, req.Unit, try)
	req.N = int64(len(f.log))
	f.log = append(f.log, req)
	f.mu.Unlock()
	switch req.Answer {
	case "202":
		w.Header().Set("X-Message-Id", fmt.Sprintf("chaos-%d", f.seq.Add(1)))
		w.WriteHeader(http.StatusAccepted)
	case "429":
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"errors":[{"message":"too many requests"}]}`, http.StatusTooManyRequests)
	case "400":
		http.Error(w, `{"errors":[{"message":"chaos refuses this one","field":"content"}]}`, http.StatusBadRequest)
	case "500":
		http.Error(w, `{"errors":[{"message":"internal error"}]}`, http.StatusInternalServerError)
	case "503":
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"errors":[{"message":"unavailable"}]}`, http.StatusServiceUnavailable)
	case "hang":
		// Past PROVIDER_TIMEOUT: the sender gives up; the message was
		// taken all the same.
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	default: // drop-before, drop-after: the connection is cut, no answer
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
			}
		}
	}
}

// snapshot is the log so far.
func (f *fakeSendGrid) snapshot() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.log...)
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
