// Command webhook-receiver receives Tidings's outbound webhooks: it
// verifies each delivery's Standard Webhooks signature with the endpoint's
// secret, drops a webhook-id it has seen (deliveries are at least once),
// and prints the event. Answer 2xx within 15 s or Tidings tries again.
//
//	WEBHOOK_SECRET=whsec_... ADDR=:9000 go run ./cmd/webhook-receiver
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func main() {
	wh, err := standardwebhooks.NewWebhook(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Fatalf("WEBHOOK_SECRET: %v", err)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = ":9000"
	}
	var mu sync.Mutex
	seen := map[string]bool{} // a real receiver keeps these in its database
	http.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		dup := seen[id]
		seen[id] = true
		mu.Unlock()
		if dup {
			w.WriteHeader(http.StatusOK) // already handled
			return
		}
		var msg struct {
			Type      string          `json:"type"`
			Timestamp string          `json:"timestamp"`
			Data      json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		log.Printf("%s %s %s", id, msg.Type, msg.Data)
		w.WriteHeader(http.StatusNoContent)
	})
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}
