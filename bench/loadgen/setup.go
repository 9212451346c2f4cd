package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"tidings/internal/auth"
)

// Env is what a scenario's setup works with: the real API, reached on the
// loopback interface, and the secret to mint dashboard sessions for it.
type Env struct {
	// API is the base URL of the Tidings API that setup provisions through.
	API string
	// Secret is the API's DASHBOARD_JWT_SECRET.
	Secret string
	// Org is the organisation id of a one-tenant scenario, and the prefix
	// of the ids of a many-tenant one (Org_0, Org_1, ...).
	Org string
	// Tenants is how many tenants a many-tenant scenario spreads over.
	Tenants int

	http *http.Client
}

// NewEnv checks that api is loopback and prepares a client for setup calls.
func NewEnv(ctx context.Context, api, secret, org string, tenants int) (*Env, error) {
	addr, err := LoopbackAddr(ctx, api)
	if err != nil {
		return nil, err
	}
	return &Env{API: "http://" + addr, Secret: secret, Org: org, Tenants: max(tenants, 1),
		http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Tenant is a provisioned tenant and a dashboard session for it.
type Tenant struct {
	ID      string
	Session string
	env     *Env
}

// Provision makes sure the tenant of organisation org exists (creating it
// is idempotent) and returns it with a session valid for a day.
func (e *Env) Provision(ctx context.Context, org string) (*Tenant, error) {
	if e.Secret == "" || org == "" {
		return nil, fmt.Errorf("loadgen: provisioning needs the dashboard secret and an organisation id")
	}
	tok, err := auth.MintHS256(e.Secret, "loadgen", org, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	t := &Tenant{ID: org, Session: tok, env: e}
	if err := e.call(ctx, "POST", "/api/tenant", tok, map[string]any{"name": "Load " + org}, nil); err != nil {
		return nil, fmt.Errorf("provision tenant %s: %w", org, err)
	}
	return t, nil
}

// NewKey creates an API key of the tenant and returns the raw key.
func (t *Tenant) NewKey(ctx context.Context, name string) (string, error) {
	var out struct {
		RawKey string `json:"rawKey"`
	}
	if err := t.env.call(ctx, "POST", "/api/api-keys", t.Session, map[string]any{"name": name}, &out); err != nil {
		return "", fmt.Errorf("create API key for %s: %w", t.ID, err)
	}
	return out.RawKey, nil
}

// Call sends a setup request with the tenant's session and decodes a JSON
// answer into out (when out is not nil); any non-2xx answer is an error.
func (t *Tenant) Call(ctx context.Context, method, path string, body, out any) error {
	return t.env.call(ctx, method, path, t.Session, body, out)
}

func (e *Env) call(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.API+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, res.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}
