package loadgen

import (
	"context"
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
