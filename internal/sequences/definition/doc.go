// Package definition parses and validates the YAML that defines a sequence
// (ADDENDUM section 6) into a Definition the sequence engine, the dry run and
// the API read. It does no I/O: whether the referenced templates and segments
// exist, and whether the from address's domain is verified, is for the caller
// to check (TemplateIDs, SegmentIDs, From).
//
// The format:
//
//	name: Onboarding                  # required on create (Options.RequireName)
//	trigger:
//	  event: user.signed_up           # required
//	  reenroll: false                 # default false
//	from: "Acme <hello@acme.com>"     # optional
//	gates: {rule node}                # optional
//	exit: {rule node}                 # optional
//	steps:                            # required, 1 to MaxSteps steps
//	  - send: welcome                 # short forms: send: <templateId>,
//	  - delay: 1d                     #              delay: <duration>
//	  - id: tips                      # optional; default step-N (1-based)
//	    action: email                 # long forms: action: email + template,
//	    template: tips                #             action: delay + duration
//	    conditions: {rule node}       # optional, email steps only
//	  - action: delay
//	    duration: 3d
//
// Rule nodes are the segment rule format of package rules, event leaves
// included; they are parsed by rules.Parse, so segments and sequences share
// one format, one validator and one evaluator.
//
// # Errors
//
// Every problem found is reported at once, as one VALIDATION_ERROR whose
// details.fields are keyed by the YAML path of the problem (trigger.event,
// steps[2].template, gates.conditions[0].operator) and whose messages start
// with the YAML line ("line 7: is required"). A missing key is reported at
// the line of the mapping that lacks it. YAML that does not parse is one
// error on content with the YAML library's message.
//
// # Decisions
//
// Unknown keys are errors, at the top level, in trigger, in steps and in
// rule nodes: a typo such as delya: must not silently drop a step's delay.
// A step uses one form: send and delay, or either with action, in one step
// are errors, and so are keys that do not belong to the step's form
// (template with send, duration on an email step). Step conditions apply to
// email steps only: what skipping a delay would mean is unclear, and
// allowing it later breaks nothing while forbidding it later would.
//
// Ids (step ids, template ids) follow the caller-id pattern of ADDENDUM
// section 3. They are read as the scalar's text, so send: 123 names the
// template "123" as it reads, not an error about numbers. Step ids are
// unique within a sequence, compared exactly; a default id (step-3) clashing
// with an explicit one is a duplicate too.
//
// trigger.event follows the rules for custom event names (events package):
// not blank, at most 256 characters, and not starting with "email.".
// Sequences are triggered by custom events only; a system event such as
// email.sent as a trigger would let a sequence enrol contacts from its own
// sends (with reenroll, forever). Rule nodes may still test system events
// (exit: email.clicked occurred).
//
// Durations are a positive whole number and one unit s, m, h, d or w
// (rules.ParseDuration; a day is 24 hours), at most MaxDelay. A delay of 0
// is an error, not a no-op step.
//
// Limits: MaxSourceBytes of YAML, MaxSteps steps, YAML nesting of
// maxYAMLDepth levels, and the rules package's limits on each rule node.
// YAML anchors, aliases and merge keys are rejected, which also rules out
// alias expansion attacks (billion laughs), as are custom and binary tags
// and documents after the first.
//
// Warnings (valid, but probably not meant): trailing delays, which only
// postpone completion, and a sequence with no email step, which sends
// nothing.
//
// # Versions
//
// ContentHash identifies the YAML byte for byte, comments and whitespace
// included. GET returns the content as stored, so any change to it must be
// stored, and a stored change makes a new version: version then answers
// "is this the content I sent" exactly, and a PUT of the same bytes is the
// idempotent no-op API.md asks for.
package definition
