package definition

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"tidings/internal/localtime"
	"tidings/internal/rules"
)

// Limits of Parse.
const (
	// MaxSourceBytes bounds the YAML. It is stored as the sequence's content
	// and parsed again on every step, so it stays small.
	MaxSourceBytes = 256 << 10
	// MaxSteps bounds the steps of one sequence.
	MaxSteps = 100
	// MaxDelay bounds one delay step: a longer wait is more likely a typo
	// (365w for 365d) than a plan, and the sum of MaxSteps delays stays far
	// inside time.Duration.
	MaxDelay = 365 * rules.Day
)

// Kind is what a step does.
type Kind string

// Step kinds.
const (
	KindEmail Kind = "email" // send a template
	KindDelay Kind = "delay" // wait before the next step
	// KindSplit draws the enrolment's branch (ADDENDUM 20): it sends
	// nothing and takes no time.
	KindSplit Kind = "split"
)

// Branch names a split's branch or group that are reserved: the control
// group of a holdout, and the one branch of a sequence without a split.
const (
	BranchHoldout = "holdout"
	BranchDefault = "default"
)

// Limits of a split.
const (
	MinBranches = 2
	MaxBranches = 5
	// MaxHoldout bounds holdout, in percent: a control group larger than
	// the treated one is more likely a mistake than a plan.
	MaxHoldout = 50
)

// Definition is a parsed, valid sequence definition. Its JSON form is the
// long form of the YAML (every step with its id and action), which Parse
// reads back to an equal Definition: it is what GET shows as the parsed
// steps.
type Definition struct {
	// Name is the top-level name; empty when the YAML has none (updates).
	Name    string  `json:"name,omitempty"`
	Trigger Trigger `json:"trigger"`
	// From overrides the tenant's default from address; empty when not set.
	From string `json:"from,omitempty"`
	// Topic is the topic of the sequence's messages (ADDENDUM 16): only
	// contacts subscribed to it receive them; empty: the template's topic.
	Topic string `json:"topic,omitempty"`
	// Window is when steps may go out, in the contact's zone; nil: any
	// time.
	Window *Window `json:"window,omitempty"`
	// Gates must hold before every step; nil when there are none.
	Gates *rules.Node `json:"gates,omitempty"`
	// Exit ends the enrolment when it holds; nil when there is none.
	Exit  *rules.Node `json:"exit,omitempty"`
	Steps []Step      `json:"steps"`
	// Holdout is the percentage (0-MaxHoldout) of new enrolments held out
	// as the control group: enrolled, sent nothing.
	Holdout int `json:"holdout,omitempty"`
	// Goal is the event that converts an enrolment; nil: none.
	Goal *Goal `json:"goal,omitempty"`
	// ExitOnGoal exits an open enrolment when it converts (Goal required).
	ExitOnGoal bool `json:"exitOnGoal,omitempty"`
	// Warnings describe what is valid but probably not meant.
	Warnings []string `json:"-"`
}

// Goal is a sequence's conversion goal: the custom event Event arriving
// for the contact within Within of its enrolment (by the event's time).
type Goal struct {
	Event  string        `json:"event"`
	Within time.Duration `json:"-"`
	// WithinSrc is Within as written (7d).
	WithinSrc string `json:"within"`
}

// Window is a send window as written (ADDENDUM 13): the days (mon..sun;
// none: every day) and the hours, from inclusive to exclusive, of the
// contact's clock.
type Window struct {
	Days []string `json:"days,omitempty"`
	From string   `json:"from"`
	To   string   `json:"to"`
}

// Next is the first instant at or after t inside the window on loc's
// clock (localtime.Window.Next); t when the window cannot be read, which
// Parse never lets through.
func (w *Window) Next(t time.Time, loc *time.Location) time.Time {
	lw, err := localtime.ParseWindow(w.Days, w.From, w.To)
	if err != nil {
		return t
	}
	return lw.Next(t, loc)
}

// Trigger says which custom event enrols a contact, or (ADDENDUM 21)
// which live segment's entered or exited does.
type Trigger struct {
	Event string `json:"event,omitempty"`
	// Segment and On, instead of Event: the live segment whose members
	// entering (TriggerEntered) or leaving (TriggerExited) enrols them.
	Segment string `json:"segment,omitempty"`
	On      string `json:"on,omitempty"`
	// Reenroll lets a contact enter again after an earlier enrolment ended;
	// false: a contact enters at most once.
	Reenroll bool `json:"reenroll"`
}

// Values of Trigger.On.
const (
	TriggerEntered = "entered"
	TriggerExited  = "exited"
)

// Step is one step of a sequence.
type Step struct {
	// ID is the step's id as given, or step-N, N its 1-based position.
	ID   string `json:"id"`
	Kind Kind   `json:"action"`
	// Template is the template an email step sends.
	Template string `json:"template,omitempty"`
	// Delay is how long a delay step waits, counted from the moment the step
	// before it was processed.
	Delay time.Duration `json:"-"`
	// DelaySrc is the delay as written (3d, 72h).
	DelaySrc string `json:"duration,omitempty"`
	// Conditions, on an email step, must hold for it to send; false skips
	// the step. Nil when there are none.
	Conditions *rules.Node `json:"conditions,omitempty"`
	// Branch, on an email or delay step, is the split branch it runs for:
	// an enrolment of another branch skips it. Empty: every branch.
	Branch string `json:"branch,omitempty"`
	// Branches, on a split step, are its branch names and weights in
	// percent (summing to 100).
	Branches map[string]int `json:"branches,omitempty"`
}

// Split returns the split step, or nil when the sequence has none (a
// sequence has at most one).
func (d *Definition) Split() *Step {
	for i := range d.Steps {
		if d.Steps[i].Kind == KindSplit {
			return &d.Steps[i]
		}
	}
	return nil
}

// BranchNames returns the branches of the split, sorted by name, or
// BranchDefault alone when there is no split: the branches an experiment
// reports.
func (d *Definition) BranchNames() []string {
	sp := d.Split()
	if sp == nil {
		return []string{BranchDefault}
	}
	out := make([]string, 0, len(sp.Branches))
	for name := range sp.Branches {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// RunsFor reports whether step s runs for an enrolment of branch: a step
// without a branch runs for every enrolment, a step with one only for
// that branch's, and none for the holdout, which is sent nothing.
func (s Step) RunsFor(branch string) bool {
	return branch != BranchHoldout && (s.Branch == "" || s.Branch == branch)
}

// StepIndex returns the position of the step with the given id, or -1.
func (d *Definition) StepIndex(id string) int {
	for i, s := range d.Steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// Next returns the step after the one with id after, or the first step
// when after is empty. It returns false after the last step and for an id
// the definition does not have (a step removed by an edit: the caller
// decides, see ADDENDUM 6 step_removed).
func (d *Definition) Next(after string) (Step, bool) {
	i := 0
	if after != "" {
		i = d.StepIndex(after)
		if i < 0 {
			return Step{}, false
		}
		i++
	}
	if i >= len(d.Steps) {
		return Step{}, false
	}
	return d.Steps[i], true
}

// EmailSteps returns the email steps, in order: the steps a dry run may
// name and that scheduled sends are made for.
func (d *Definition) EmailSteps() []Step {
	var out []Step
	for _, s := range d.Steps {
		if s.Kind == KindEmail {
			out = append(out, s)
		}
	}
	return out
}

// TemplateIDs returns the templates the email steps send, each once, in
// order of first use: the caller answers TEMPLATE_NOT_FOUND when one is
// missing.
func (d *Definition) TemplateIDs() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range d.Steps {
		if s.Kind == KindEmail && !seen[s.Template] {
			seen[s.Template] = true
			out = append(out, s.Template)
		}
	}
	return out
}

// ruleTrees returns every rule tree of the definition: gates, exit, then
// step conditions in order.
func (d *Definition) ruleTrees() []*rules.Node {
	trees := []*rules.Node{d.Gates, d.Exit}
	for _, s := range d.Steps {
		trees = append(trees, s.Conditions)
	}
	return trees
}

// SegmentIDs returns the segments the rule trees refer to, each once, in
// order of appearance, for the caller to check that they exist.
func (d *Definition) SegmentIDs() []string {
	return unique(d.ruleTrees(), (*rules.Node).SegmentRefs)
}

// EventNames returns the event names the rule trees test, each once, in
// order of appearance: an incoming event of another name cannot change
// what they decide (referenced segments aside).
func (d *Definition) EventNames() []string {
	return unique(d.ruleTrees(), (*rules.Node).EventNames)
}

func unique(trees []*rules.Node, list func(*rules.Node) []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range trees {
		if t == nil {
			continue
		}
		for _, s := range list(t) {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// ContentHash identifies YAML content byte for byte (hex SHA-256). Equal
// hashes mean a PUT changes nothing and makes no new version; a change to a
// comment or to whitespace is a change, because GET returns the content as
// stored.
func ContentHash(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}
