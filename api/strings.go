package api

import (
	"strings"

	"tidings/store"
)

func trimSpace(s string) string { return strings.TrimSpace(s) }

// notFoundOr turns "no rows" into the given not-found error.
func notFoundOr(err error, notFound error) error {
	if store.IsNoRows(err) {
		return notFound
	}
	return err
}
