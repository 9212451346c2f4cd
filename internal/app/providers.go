package app

import (
	"context"
	"fmt"

	"tidings/internal/config"
	"tidings/internal/provider"
	"tidings/internal/provider/ses"
)

// OpenPool builds each provider PROVIDERS names once (checked at start,
// as provider.New checks one) and the streams' pool over them (ADDENDUM
// 22); EMAIL_PROVIDER alone is a pool of one.
func OpenPool(ctx context.Context, cfg *config.Config, opts ...provider.Option) (*provider.Pool, error) {
	built := map[string]provider.Provider{}
	for _, name := range cfg.Providers {
		var p provider.Provider
		var err error
		if name == provider.NameSES {
			p, err = ses.New(ctx, ses.Config{Region: cfg.SESRegion, ConfigurationSet: cfg.SESConfigurationSet,
				Endpoint: cfg.SESEndpoint, Timeout: cfg.ProviderTimeout})
		} else {
			p, err = provider.NewNamed(cfg, name, opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", name, err)
		}
		built[name] = p
	}
	pick := func(names []string) []provider.Provider {
		out := make([]provider.Provider, len(names))
		for i, n := range names {
			out[i] = built[n]
		}
		return out
	}
	return provider.NewPool(map[provider.Stream][]provider.Provider{
		provider.Transactional: pick(cfg.TransactionalProviders),
		provider.Marketing:     pick(cfg.MarketingProviders),
	}, cfg.ProviderRetryAfter), nil
}
