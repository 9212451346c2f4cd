// Command devtoken prints a development dashboard session token (HS256,
// signed with DASHBOARD_JWT_SECRET, carrying DASHBOARD_JWT_ISSUER and
// DASHBOARD_JWT_AUDIENCE when set, as the api requires outside DEV_MODE)
// for an organisation id, so a new user can provision a tenant and create
// the first API key. make token runs it on make run's var/secrets.env.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"tidings/internal/auth"
)

func main() {
	org := flag.String("org", "", "organisation id (becomes the tenant id)")
	user := flag.String("user", "dev-user", "user id (sub claim)")
	ttl := flag.Duration("ttl", 24*time.Hour, "token lifetime")
	flag.Parse()
	secret := os.Getenv("DASHBOARD_JWT_SECRET")
	if *org == "" || secret == "" {
		fmt.Fprintln(os.Stderr, "usage: DASHBOARD_JWT_SECRET=... devtoken -org <org id> [-user id] [-ttl 24h]")
		os.Exit(2)
	}
	tok, err := auth.MintHS256Claims(secret, os.Getenv("DASHBOARD_JWT_ISSUER"), os.Getenv("DASHBOARD_JWT_AUDIENCE"), *user, *org, *ttl)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(tok)
}
