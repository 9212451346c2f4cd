// Package delivery makes email leave and records what became of it: the
// transactional send (checks in a fixed order, render, provider, record),
// the send history, and the outcomes that come back from the provider's
// webhook and from tracking. The sequence engine sends through the same
// code, so both kinds of send obey one set of rules.
package delivery
