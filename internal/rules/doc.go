// Package rules parses, validates and evaluates the rule trees of segments
// and sequences (gates, exit and step conditions), in Go and in SQL.
//
// A tree is a group {operator: and|or|not, conditions: [...]} whose
// conditions are groups or leaves, any depth:
//
//	{type: property, field, operator, value}    contact.properties.<field>
//	{type: derived,  field, operator, value}    totalSends, totalOpens, totalClicks,
//	                                            lastEventAt, inactiveDays
//	{type: segment,  segmentId, operator}       memberOf | notMemberOf
//	{type: event,    name, operator, within?}   occurred | notOccurred
//
// Parse validates a tree (JSON text or a decoded JSON/YAML document) and
// reports every problem with its path (rules.conditions[2].operator).
// CheckCycles checks segment references against the store. Eval decides a
// tree for one contact in Go (dry runs, sequences); ToSQL compiles it into
// one predicate over the contacts table (segment compute). Both give the same
// answer for the same data: the package's tests run one table of cases, and
// randomised trees, through both against PostgreSQL.
//
// The package does no I/O: callers load contacts, events and segments.
//
// # Semantics
//
// ADDENDUM 10 fixes the main rules; the corner cases it leaves open are
// decided as follows.
//
// Missing values. A property that is absent or JSON null is missing. Every
// operator is false on a missing field except notExists, notEquals,
// notContains and notIncludes, which are true.
//
// Negations. Each negated operator is exactly the negation of its positive:
// notEquals = !equals, notContains = !contains, notIncludes = !includes,
// notExists = !exists, notMemberOf = !memberOf, notOccurred = !occurred. So a
// type mismatch makes the negated operator true: notContains on a number,
// notIncludes on a string, notEquals 1 on "1" are all true.
//
// equals. Type-strict and scalar: a string equals only the same string
// (case-sensitive), a boolean only the same boolean, a number any number of
// the same value (1 equals 1.0 and 1e0; 1 does not equal "1"). Numbers are
// compared as exact decimals, as PostgreSQL's numeric does; decode property
// JSON with DecodeProperties to keep that exactness in Go. An array or object
// field never equals a scalar: use includes.
//
// Ordering (greaterThan, lessThan, greaterOrEqual, lessOrEqual). The value is
// a number or a timestamp string (Parse rejects anything else). A number
// compares only with a number field; a timestamp only with a string field that
// is itself a timestamp, comparing instants (offsets honoured). Everything
// else is false: the string "5" against 5, a boolean, an array, a string that
// is not a timestamp. A timestamp is YYYY-MM-DD (midnight UTC) or
// YYYY-MM-DDTHH:MM[:SS[.ffffff]] followed by Z or ±HH:MM: years 0001-9999,
// real calendar days (2023-02-29 is not a timestamp), at most six fraction
// digits, no leap second, an offset of at most ±14:59, upper-case T and Z.
// A time without an offset is not accepted, because its instant would depend
// on a time zone.
//
// String operators (contains, notContains, startsWith, endsWith). The field
// must be a string; a number or an array of strings never contains anything.
// Matching is exact and case-sensitive; % and _ are ordinary characters; the
// empty string is contained in, starts and ends every string.
//
// Arrays. includes and notIncludes take a scalar and need an array field
// holding an element equal to it (type-strict, as equals). includesAll and
// includesAny take a non-empty array: the field must be an array holding all,
// respectively at least one, of its elements. A scalar field is not treated
// as a one-element array. An object field matches nothing but exists and the
// negations.
//
// Groups. and is true when all conditions hold, or when at least one holds,
// not when none holds (not over several conditions is "none of them"). An
// empty and is true, an empty or false, an empty not true.
//
// Fields. A property field is one top-level key, compared exactly: a dot is
// part of the key (properties hold no nested objects). Derived fields have
// fixed types, so Parse rejects operators and values that could never match
// them: totalSends, totalOpens, totalClicks and inactiveDays are numbers and
// take equals, notEquals, the ordering operators with a number, exists
// (always true) and notExists (always false); lastEventAt is a timestamp or
// missing and takes the same operators with a timestamp.
//
// inactiveDays is the number of whole 24-hour days from lastEventAt, or from
// createdAt when lastEventAt is null, to now: 0 when that instant lies in the
// future (events may be stamped up to five minutes ahead), and capped at
// 2,000,000. It may be compared with fractions: inactiveDays > 2.5 holds from
// 3 days on; equals 2.5 never holds.
//
// Segment leaves evaluate the referenced segment's current rules, not its
// stored membership. Eval treats a segment it cannot resolve, or one
// referring back to itself, as having no members (memberOf false); ToSQL
// returns an *UnknownSegmentError or a *CycleError instead. Parse does not
// look segments up; CheckCycles does, with the store's help.
//
// Event leaves. occurred holds when the contact has an event with exactly
// that name (case-sensitive) at or after now - within when within is given,
// and at or after Env.Since when that is set (sequences: the enrolment time).
// Since does not reach into referenced segments: a segment leaf in a gate
// asks whether the contact is a member as segment compute sees it, with all
// of its events. Events stamped in the future count. within is a duration as
// ParseDuration reads it. The same leaf serves segments (has the contact ever,
// or within the duration, had the event) and sequences (since enrolment).
//
// Validation. Unknown keys are errors, so that a typo such as "withn" cannot
// silently drop a condition. exists and notExists take no value (null is
// accepted as none). Strings must be valid UTF-8 without NUL, which
// PostgreSQL cannot store. Trees are limited in depth (DefaultMaxDepth),
// size (DefaultMaxConditions) and value sizes.
package rules
