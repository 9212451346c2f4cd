package worker

import (
	"net/http"

	"github.com/hibiken/asynq"
	"github.com/hibiken/asynqmon"
)

// AdminHandler serves asynqmon at /monitoring/ and a liveness check at
// /healthz for operators.
func AdminHandler(opt asynq.RedisConnOpt) (http.Handler, func()) {
	mon := asynqmon.New(asynqmon.Options{RootPath: "/monitoring", RedisConnOpt: opt})
	mux := http.NewServeMux()
	mux.Handle("/monitoring/", mon)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux, func() { _ = mon.Close() }
}
