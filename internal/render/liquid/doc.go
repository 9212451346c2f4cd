// Package liquid is the bounded Liquid runtime of template rendering: it
// parses Liquid (github.com/osteele/liquid, standard and non-strict: a
// missing variable is empty, values are inserted as they are) and renders
// it within a Budget.
//
// Templates come from tenants, and osteele/liquid has no resource limits of
// its own, so every render here has a budget of loop iterations, string
// bytes made by filters and capture, output bytes and time, and stops with
// a *LimitError (ErrBudget) when a template needs more, or when the caller's
// context ends (see budget.go for how the checks are added without forking
// the library).
//
// Parse also refuses what would otherwise fail later or go out verbatim:
// Liquid's own syntax errors, and delimiters osteele/liquid reads as text
// but Shopify Liquid rejects; CheckFilters finds filters that do not exist,
// which Liquid notices only when it runs. RequiredVariables lists the
// variables templates read.
//
// What a template's values are (contact, event, the caller's variables),
// and what happens to the output (sanitising, the text part), belong to the
// render pipeline, package render.
package liquid
