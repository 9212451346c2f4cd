package api

import "strings"

func trimSpace(s string) string { return strings.TrimSpace(s) }
