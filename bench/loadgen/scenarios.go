package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/valyala/fasthttp"
)

// A Scenario is one kind of load. Setup runs once, before any measurement,
// and provisions what the requests need through the API (Env); the Fill it
// returns then builds every request, for whichever target is being loaded.
//
// To add a scenario, write its Setup and list it in Scenarios. A
// many-tenant load provisions Env.Tenants tenants (ids from Env.Org) in
// Setup and picks one per request from n in Fill, for example
// tenants[n%len(tenants)].
type Scenario struct {
	Name        string
	Description string
	Setup       func(ctx context.Context, env *Env) (Fill, error)
}

// Scenarios lists every scenario by name.
var Scenarios = map[string]Scenario{
	"apikeys": {
		Name:        "apikeys",
		Description: "GET /api/api-keys authenticated with an API key of one tenant holding a few keys",
		Setup:       setupAPIKeys,
	},
	"events": {
		Name:        "events",
		Description: "POST /api/events: a custom event for an existing contact, spread over -tenants tenants",
		Setup:       setupEvents,
	},
	"healthz": {
		Name:        "healthz",
		Description: "GET /healthz: a small static JSON answer, no authentication",
		Setup:       setupHealthz,
	},
}

// ScenarioNames lists the scenario names, sorted.
func ScenarioNames() []string {
	names := make([]string, 0, len(Scenarios))
	for n := range Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// apiKeysListed is how many keys the apikeys tenant holds, so the list the
// handler renders is a realistic few items rather than one.
const apiKeysListed = 3

func setupAPIKeys(ctx context.Context, env *Env) (Fill, error) {
	t, err := env.Provision(ctx, env.Org)
	if err != nil {
		return nil, err
	}
	var key string
	for i := 0; i < apiKeysListed; i++ {
		k, err := t.NewKey(ctx, fmt.Sprintf("loadgen %d", i))
		if err != nil {
			return nil, err
		}
		if key == "" {
			key = k
		}
	}
	auth := "Bearer " + key
	return func(req *fasthttp.Request, _ uint64) {
		req.Header.SetMethod(fasthttp.MethodGet)
		req.SetRequestURI("/api/api-keys")
		req.Header.Set(fasthttp.HeaderAuthorization, auth)
	}, nil
}

func setupHealthz(context.Context, *Env) (Fill, error) {
	return func(req *fasthttp.Request, _ uint64) {
		req.Header.SetMethod(fasthttp.MethodGet)
		req.SetRequestURI("/healthz")
	}, nil
}

// eventsContacts is how many contacts each tenant of the events scenario
// holds; bench/pgxevents inserts its baseline rows for the same contacts.
const eventsContacts = 20

// setupEvents provisions Env.Tenants tenants, each with an API key and
// eventsContacts contacts, and posts a custom event per request, spreading
// requests over tenants first and contacts second so that consecutive
// requests rarely touch the same contact row.
func setupEvents(ctx context.Context, env *Env) (Fill, error) {
	type target struct {
		auth   string
		bodies [][]byte
	}
	targets := make([]target, env.Tenants)
	for i := range targets {
		t, err := env.Provision(ctx, fmt.Sprintf("%s_%d", env.Org, i))
		if err != nil {
			return nil, err
		}
		key, err := t.NewKey(ctx, "loadgen events")
		if err != nil {
			return nil, err
		}
		targets[i].auth = "Bearer " + key
		for c := 0; c < eventsContacts; c++ {
			email := fmt.Sprintf("user%d@%s.example.com", c, t.ID)
			// PUT is an upsert, so setup can be rerun against the same org.
			if err := t.Call(ctx, "PUT", "/api/contacts", map[string]any{"email": email}, nil); err != nil {
				return nil, err
			}
			body, err := json.Marshal(map[string]any{"email": email, "name": "page_view",
				"properties": map[string]any{"path": "/pricing", "n": 1}})
			if err != nil {
				return nil, err
			}
			targets[i].bodies = append(targets[i].bodies, body)
		}
	}
	return func(req *fasthttp.Request, n uint64) {
		t := targets[n%uint64(len(targets))]
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("/api/events")
		req.Header.Set(fasthttp.HeaderAuthorization, t.auth)
		req.Header.SetContentType("application/json")
		req.SetBody(t.bodies[(n/uint64(len(targets)))%uint64(len(t.bodies))])
	}, nil
}
