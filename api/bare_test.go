package api

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
)

// The benchmark baseline must do the same work as the real route: same
// query, same rendering, byte for byte.
func TestBareServesTheSameAPIKeyList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_bare")
	key := b.apiKey(tok)
	b.apiKey(tok)
	real := b.expect("GET", "/api/api-keys", key, nil, 200)

	bare := NewBare(b.db, "org_bare", slog.New(slog.DiscardHandler))
	for path, want := range map[string][]byte{
		"/api/api-keys": real.raw,
		"/healthz":      b.expect("GET", "/healthz", "", nil, 200).raw,
	} {
		res, err := bare.Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !bytes.Equal(got, want) {
			t.Fatalf("%s: bare answered %d %s, the API %s", path, res.StatusCode, got, want)
		}
	}
}
