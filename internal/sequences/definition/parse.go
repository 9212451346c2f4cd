package definition

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/localtime"
	"tidings/internal/rules"
)

// Options tune Parse for the request at hand.
type Options struct {
	// RequireName makes a missing top-level name an error: on create, unless
	// the request names the sequence itself (the JSON wrapper's name).
	RequireName bool
}

const (
	maxNameLen  = 256 // characters, as other resource names
	maxEventLen = 256 // characters, as events.ValidateName
	maxFromLen  = 512 // bytes
	// maxYAMLDepth bounds YAML nesting. The deepest valid document, a step
	// condition nested rules.DefaultMaxDepth groups deep, needs about 40.
	maxYAMLDepth = 64
	// maxProblems bounds the fields one error lists: with the summary on
	// content they fill apperr's bound exactly, so none is dropped there.
	maxProblems = apperr.MaxFields - 1
	// maxKeyInPath bounds a key as an error path names it: a document of
	// one 256 KiB unknown key gets a short answer, not that key back.
	maxKeyInPath = 64
	// maxPathLen bounds an error path: a step condition nested as deep as
	// the rules allow, ending in a shortened key.
	maxPathLen = 512
)

var (
	topKeys     = []string{"name", "trigger", "from", "topic", "window", "gates", "exit", "steps", "holdout", "goal", "exitOnGoal"}
	goalKeys    = []string{"event", "within"}
	windowKeys  = []string{"days", "from", "to"}
	triggerKeys = []string{"event", "reenroll", "segment", "on"}
	stepKeys    = []string{"id", "send", "delay", "split", "action", "template", "duration", "branches", "branch", "conditions"}
)

// Parse validates a sequence definition and returns it parsed. Every
// problem is reported in one VALIDATION_ERROR (apperr.Validation): see the
// package documentation for the paths and messages.
func Parse(src []byte, opt Options) (*Definition, error) {
	p := &parser{lines: map[string]int{}}
	root := p.document(src)
	if root == nil {
		return nil, p.err()
	}
	d := p.definition(root, opt)
	if err := p.err(); err != nil {
		return nil, err
	}
	d.Warnings = warnings(d)
	return d, nil
}

// ParseJSON reads a Definition back from its JSON form as stored (the
// definition column, jsonb). JSON is YAML, but PostgreSQL writes some
// characters inside strings raw that YAML refuses (C1 controls, U+FEFF) or
// reads as line breaks, which a double-quoted scalar folds into a space
// (U+0085, U+2028, U+2029): they are escaped first, so a definition Parse
// accepted comes back equal, whatever its strings hold.
func ParseJSON(raw []byte) (*Definition, error) {
	return Parse(escapeForYAML(raw), Options{})
}

// escapeForYAML writes the runes YAML cannot hold raw in a double-quoted
// scalar as \u escapes. In JSON text they can only occur inside strings,
// where the escape means the same. Valid UTF-8 without them is returned as
// it is.
func escapeForYAML(raw []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(raw); {
		r, size := utf8.DecodeRune(raw[i:])
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff {
			out = append(out, raw[done:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			done = i + size
		}
		i += size
	}
	if out == nil {
		return raw
	}
	return append(out, raw[done:]...)
}

type parser struct {
	fields apperr.Fields
	// lines maps the YAML paths seen to their line, so that a rule error,
	// which knows only its path, can name its line.
	lines   map[string]int
	dropped int // problems not reported, beyond maxProblems
}

// err is the VALIDATION_ERROR of the problems found, or nil.
func (p *parser) err() error {
	if p.dropped > 0 {
		p.fields.Add("content", fmt.Sprintf("has %d more problems than the %d listed", p.dropped, maxProblems))
	}
	return p.fields.Err()
}

// errorf records a problem at path, on the given YAML line. Beyond
// maxProblems paths it only counts: a document of 30,000 unknown keys
// should not answer with 30,000 messages.
func (p *parser) errorf(path string, line int, format string, args ...any) {
	if _, seen := p.fields[path]; !seen && len(p.fields) >= maxProblems {
		p.dropped++
		return
	}
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = "line " + strconv.Itoa(line) + ": " + msg
	}
	p.fields.Add(path, msg)
}

// document decodes src into the root mapping, or records why it cannot.
func (p *parser) document(src []byte) *yaml.Node {
	switch {
	case len(src) > MaxSourceBytes:
		p.errorf("content", 0, "is too large: at most %d bytes of YAML", MaxSourceBytes)
		return nil
	case !utf8.Valid(src) || bytes.IndexByte(src, 0) >= 0:
		p.errorf("content", 0, "must be valid UTF-8 without NUL characters")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf("content", 0, "is empty: a sequence needs trigger and steps")
		} else {
			msg := strings.TrimPrefix(err.Error(), "yaml: ")
			if line := misindented(src, msg); line > 0 {
				msg += fmt.Sprintf(" (the first line out of step is line %d)", line)
			}
			p.errorf("content", 0, "is not valid YAML: %s", msg)
		}
		return nil
	}
	// Empty documents after the first (a trailing ---) are harmless; a
	// second document with content would be ignored by a reader that
	// stops at the first, so it is an error.
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			p.errorf("content", 0, "is not valid YAML after the first document: %s", strings.TrimPrefix(err.Error(), "yaml: "))
			return nil
		}
		if len(more.Content) != 1 || !isNull(more.Content[0]) {
			p.errorf("content", more.Line, "must hold one YAML document, not several")
			return nil
		}
	}
	if !p.plain(&doc, 0) {
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		if root.ShortTag() == "!!null" {
			p.errorf("content", root.Line, "is empty: a sequence needs trigger and steps")
		} else {
			p.errorf("content", root.Line, "must be a YAML mapping with trigger and steps")
		}
		return nil
	}
	return root
}

// scalarTags are the tags a definition may use, explicitly or implicitly.
var scalarTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true, "!!timestamp": true,
}

// plain checks that the YAML uses nothing the definition format has no use
// for: anchors and aliases (and so merge keys, and alias bombs), custom or
// binary tags, deep nesting. It reports the first such thing on content.
func (p *parser) plain(n *yaml.Node, depth int) bool {
	switch {
	case depth > maxYAMLDepth:
		p.errorf("content", n.Line, "is nested too deep: at most %d levels", maxYAMLDepth)
		return false
	case n.Kind == yaml.AliasNode:
		p.errorf("content", n.Line, "uses the YAML alias *%s: anchors and aliases are not supported", n.Value)
		return false
	case n.Anchor != "":
		p.errorf("content", n.Line, "uses the YAML anchor &%s: anchors and aliases are not supported", n.Anchor)
		return false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if tag := n.ShortTag(); !scalarTags[tag] {
			p.errorf("content", n.Line, "uses the YAML tag %s, which is not supported", tag)
			return false
		}
	case yaml.MappingNode, yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!map" && tag != "!!seq" {
			p.errorf("content", n.Line, "uses the YAML tag %s, which is not supported", tag)
			return false
		}
	}
	for _, c := range n.Content {
		if !p.plain(c, depth+1) {
			return false
		}
	}
	return true
}

// entry is one key of a mapping.
type entry struct {
	key  string
	line int // the key's line
	val  *yaml.Node
}

// keyed is mapping's entries by key, for a mapping of known keys.
func (p *parser) keyed(path string, n *yaml.Node, known []string, what string) map[string]entry {
	got := map[string]entry{}
	for _, e := range p.mapping(path, n, known, what) {
		got[e.key] = e
	}
	return got
}

// mapping returns the entries of a mapping node, reporting duplicate keys,
// keys that are not scalars, and keys not in known (nil: any key).
func (p *parser) mapping(path string, n *yaml.Node, known []string, what string) []entry {
	var out []entry
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			// At the top level the mapping is the whole content.
			p.errorf(cmp.Or(path, "content"), k.Line, "has a key that is not a string")
			continue
		}
		if line, dup := first[k.Value]; dup {
			p.errorf(join(path, shortKey(k.Value)), k.Line, "is a duplicate key (first at line %d)", line)
			continue
		}
		first[k.Value] = k.Line
		if known != nil && !contains(known, k.Value) {
			p.errorf(join(path, shortKey(k.Value)), k.Line, "is not a known key: %s has %s", what, strings.Join(known, ", "))
			continue
		}
		p.lines[join(path, k.Value)] = k.Line
		out = append(out, entry{k.Value, k.Line, v})
	}
	return out
}

// shortKey is key as an error path names it: at most maxKeyInPath bytes,
// cut at a character boundary and marked with "...", and the empty key
// (a bare "?") as "" in quotes, so that no path is empty.
func shortKey(key string) string {
	if key == "" {
		return `""`
	}
	if len(key) <= maxKeyInPath {
		return key
	}
	cut := maxKeyInPath
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return key[:cut] + "..."
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// text returns a scalar's text as written: ids, names and durations are
// read as text whatever YAML would resolve them to (send: 123 names
// template "123"). It reports a missing value only when required.
func (p *parser) text(path string, line int, n *yaml.Node, required bool) (string, bool) {
	switch {
	case isNull(n):
		if required {
			p.errorf(path, line, "is required")
		}
		return "", false
	case n.Kind != yaml.ScalarNode:
		p.errorf(path, n.Line, "must be a string, not a %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

func (p *parser) definition(root *yaml.Node, opt Options) *Definition {
	d := &Definition{}
	got := p.keyed("", root, topKeys, "a sequence")
	if e, ok := got["name"]; ok && !isNull(e.val) {
		if s, ok := p.text("name", e.line, e.val, true); ok {
			n := utf8.RuneCountInString(s)
			switch {
			case strings.TrimSpace(s) == "":
				p.errorf("name", e.line, "must not be blank")
			case n > maxNameLen:
				p.errorf("name", e.line, "must be at most %d characters", maxNameLen)
			default:
				d.Name = s
			}
		}
	} else if opt.RequireName {
		p.errorf("name", lineOr(e, root), "is required when the sequence is created")
	}

	if e, ok := got["trigger"]; ok && !isNull(e.val) {
		d.Trigger = p.trigger(e)
	} else {
		p.errorf("trigger.event", lineOr(e, root), "is required: the custom event that enrols contacts")
	}

	if e, ok := got["from"]; ok && !isNull(e.val) {
		if s, ok := p.text("from", e.line, e.val, false); ok {
			d.From = p.from(e.line, s)
		}
	}
	if e, ok := got["topic"]; ok && !isNull(e.val) {
		if s, ok := p.text("topic", e.line, e.val, false); ok {
			if ids.Valid(s) {
				d.Topic = s
			} else {
				p.errorf("topic", e.line, "must be a topic id")
			}
		}
	}
	if e, ok := got["window"]; ok && !isNull(e.val) {
		d.Window = p.window(e)
	}
	if e, ok := got["gates"]; ok && !isNull(e.val) {
		d.Gates = p.rule("gates", e.line, e.val)
	}
	if e, ok := got["exit"]; ok && !isNull(e.val) {
		d.Exit = p.rule("exit", e.line, e.val)
	}
	if e, ok := got["steps"]; ok && !isNull(e.val) {
		d.Steps = p.steps(e)
	} else {
		p.errorf("steps", lineOr(e, root), "is required: a list of steps")
	}
	p.experiment(d, got)
	return d
}

// experiment reads the top-level holdout, goal and exitOnGoal (ADDENDUM
// 20).
func (p *parser) experiment(d *Definition, got map[string]entry) {
	if e, ok := got["holdout"]; ok && !isNull(e.val) {
		n, err := strconv.Atoi(e.val.Value)
		switch {
		case e.val.Kind != yaml.ScalarNode || e.val.ShortTag() != "!!int" || err != nil:
			p.errorf("holdout", e.line, "must be a whole number of percent, 0 to %d", MaxHoldout)
		case n < 0 || n > MaxHoldout:
			p.errorf("holdout", e.line, "must be 0 to %d (percent of new enrolments held out)", MaxHoldout)
		default:
			d.Holdout = n
		}
	}
	if e, ok := got["goal"]; ok && !isNull(e.val) {
		d.Goal = p.goal(e)
	}
	if e, ok := got["exitOnGoal"]; ok && !isNull(e.val) {
		if e.val.Kind != yaml.ScalarNode || e.val.ShortTag() != "!!bool" {
			p.errorf("exitOnGoal", e.line, "must be true or false")
		} else {
			_ = e.val.Decode(&d.ExitOnGoal) // a !!bool scalar always decodes
			if d.ExitOnGoal && got["goal"].val == nil {
				p.errorf("exitOnGoal", e.line, "needs a goal: the event whose arrival exits the enrolment")
			}
		}
	}
}

// goal reads goal: {event: <custom event>, within: <duration>}.
func (p *parser) goal(e entry) *Goal {
	if e.val.Kind != yaml.MappingNode {
		p.errorf("goal", e.line, "must be a mapping such as {event: purchase.completed, within: 14d}")
		return nil
	}
	got := p.keyed("goal", e.val, goalKeys, "goal")
	g := &Goal{}
	ok := true
	if ev, present := got["event"]; !present || isNull(ev.val) {
		p.errorf("goal.event", e.line, "is required: the custom event that converts an enrolment")
		ok = false
	} else if name, good := p.text("goal.event", ev.line, ev.val, true); !good {
		ok = false
	} else {
		switch {
		case strings.TrimSpace(name) == "":
			p.errorf("goal.event", ev.line, "must not be blank")
			ok = false
		case utf8.RuneCountInString(name) > maxEventLen:
			p.errorf("goal.event", ev.line, "must be at most %d characters", maxEventLen)
			ok = false
		case strings.HasPrefix(name, "email."):
			// A goal is something the contact does that the tenant
			// records; system events are recorded on another path.
			p.errorf("goal.event", ev.line, "must be a custom event: names starting with \"email.\" are system events")
			ok = false
		default:
			g.Event = name
		}
	}
	if we, present := got["within"]; !present || isNull(we.val) {
		p.errorf("goal.within", e.line, "is required: how long after enrolment the goal event counts, such as 14d")
		ok = false
	} else if g.Within, g.WithinSrc = p.duration("goal.within", we); g.Within == 0 {
		ok = false
	}
	if !ok {
		return nil
	}
	return g
}

// window reads the send window: {days: [mon, ...], from: "09:00", to:
// "17:00"}; days optional (every day).
func (p *parser) window(e entry) *Window {
	if e.val.Kind != yaml.MappingNode {
		p.errorf("window", e.line, "must be a mapping such as {days: [mon, tue], from: \"09:00\", to: \"17:00\"}")
		return nil
	}
	got := p.keyed("window", e.val, windowKeys, "window")
	w := &Window{}
	ok := true
	for _, k := range []string{"from", "to"} {
		we, present := got[k]
		if !present || isNull(we.val) {
			p.errorf("window."+k, e.line, "is required: a time of day, HH:MM (24-hour clock)")
			ok = false
			continue
		}
		s, good := p.text("window."+k, we.line, we.val, true)
		if !good {
			ok = false
			continue
		}
		if k == "from" {
			w.From = s
		} else {
			w.To = s
		}
	}
	if de, present := got["days"]; present && !isNull(de.val) {
		if de.val.Kind != yaml.SequenceNode {
			p.errorf("window.days", de.line, "must be a list of days such as [mon, tue, wed, thu, fri]")
			ok = false
		} else {
			for i, n := range de.val.Content {
				s, good := p.text(fmt.Sprintf("window.days[%d]", i), n.Line, n, true)
				if !good {
					ok = false
					continue
				}
				w.Days = append(w.Days, s)
			}
		}
	}
	if !ok {
		return nil
	}
	if _, err := localtime.ParseWindow(w.Days, w.From, w.To); err != nil {
		field, msg, found := strings.Cut(err.Error(), ": ")
		if !found {
			field, msg = "", err.Error()
		}
		path := "window"
		if field != "" {
			path += "." + field
		}
		p.errorf(path, e.line, "%s", msg)
		return nil
	}
	return w
}

// lineOr is the line of e's key when present (as null), else of the
// mapping that lacks it.
func lineOr(e entry, parent *yaml.Node) int {
	if e.line > 0 {
		return e.line
	}
	return parent.Line
}

func (p *parser) trigger(e entry) Trigger {
	var t Trigger
	if e.val.Kind != yaml.MappingNode {
		p.errorf("trigger", e.line, "must be a mapping such as {event: user.signed_up}")
		return t
	}
	got := p.keyed("trigger", e.val, triggerKeys, "trigger")
	ev, ok := got["event"]
	if seg, isSeg := got["segment"]; isSeg || got["on"].key != "" {
		// A live segment's entered or exited enrols instead (ADDENDUM 21);
		// that the segment exists and is live is the store's to check.
		t.Segment, t.On = p.segmentTrigger(e, seg, got["on"], ok)
	} else if !ok {
		p.errorf("trigger.event", e.line, "is required: the custom event that enrols contacts")
	} else if s, ok := p.text("trigger.event", ev.line, ev.val, true); ok {
		switch {
		case strings.TrimSpace(s) == "":
			p.errorf("trigger.event", ev.line, "must not be blank")
		case utf8.RuneCountInString(s) > maxEventLen:
			p.errorf("trigger.event", ev.line, "must be at most %d characters", maxEventLen)
		case strings.HasPrefix(s, "email."):
			p.errorf("trigger.event", ev.line, "must be a custom event: names starting with \"email.\" are system events, which do not enrol contacts")
		default:
			t.Event = s
		}
	}
	if re, ok := got["reenroll"]; ok && !isNull(re.val) {
		if re.val.Kind != yaml.ScalarNode || re.val.ShortTag() != "!!bool" {
			p.errorf("trigger.reenroll", re.line, "must be true or false")
		} else {
			_ = re.val.Decode(&t.Reenroll) // a !!bool scalar always decodes
		}
	}
	return t
}

// segmentTrigger reads trigger.segment and trigger.on, which replace
// trigger.event.
func (p *parser) segmentTrigger(e, seg, on entry, hasEvent bool) (string, string) {
	if hasEvent {
		p.errorf("trigger.event", e.line, "must not be given with trigger.segment: a sequence starts on one or the other")
	}
	var id, when string
	if seg.key == "" {
		p.errorf("trigger.segment", e.line, "is required with trigger.on: the live segment whose members start the sequence")
	} else if s, ok := p.text("trigger.segment", seg.line, seg.val, true); ok {
		if strings.TrimSpace(s) == "" {
			p.errorf("trigger.segment", seg.line, "must not be blank")
		} else {
			id = s
		}
	}
	if on.key == "" {
		p.errorf("trigger.on", e.line, "is required with trigger.segment: entered or exited")
	} else if s, ok := p.text("trigger.on", on.line, on.val, true); ok {
		if s != TriggerEntered && s != TriggerExited {
			p.errorf("trigger.on", on.line, "must be entered or exited")
		} else {
			when = s
		}
	}
	return id, when
}

// from checks an optional from address, "a@b.example" or
// "Name <a@b.example>". Whether its domain may send is checked at send
// time, as the tenant's settings may change after the sequence is saved.
func (p *parser) from(line int, s string) string {
	switch {
	case len(s) > maxFromLen:
		p.errorf("from", line, "must be at most %d bytes", maxFromLen)
	case strings.ContainsAny(s, "\r\n"):
		p.errorf("from", line, "must not contain a line break")
	default:
		if _, err := mail.ParseAddress(s); err != nil {
			p.errorf("from", line, "must be an email address such as hello@acme.com or \"Acme <hello@acme.com>\"")
			return ""
		}
		return s
	}
	return ""
}

func (p *parser) steps(e entry) []Step {
	n := e.val
	if n.Kind != yaml.SequenceNode {
		p.errorf("steps", e.line, "must be a list of steps")
		return nil
	}
	switch {
	case len(n.Content) == 0:
		p.errorf("steps", e.line, "must list at least one step")
		return nil
	case len(n.Content) > MaxSteps:
		p.errorf("steps", e.line, "has %d steps: at most %d", len(n.Content), MaxSteps)
		return nil
	}
	steps := make([]Step, len(n.Content))
	idAt := map[string]int{} // step id -> index of its first step
	for i, sn := range n.Content {
		path := "steps[" + strconv.Itoa(i) + "]"
		p.lines[path] = sn.Line
		explicit := p.step(path, sn, &steps[i])
		if steps[i].ID == "" && !explicit {
			steps[i].ID = "step-" + strconv.Itoa(i+1)
		}
		if steps[i].ID == "" {
			continue // an invalid id, reported
		}
		if j, dup := idAt[steps[i].ID]; dup {
			where, line := path, sn.Line
			if explicit {
				where, line = path+".id", p.lines[path+".id"]
			}
			p.errorf(where, line, "duplicate step id %q: steps[%d] has it too", steps[i].ID, j)
			continue
		}
		idAt[steps[i].ID] = i
	}
	p.branches(n, steps)
	return steps
}

// branches checks the split steps and the branch keys: at most one split,
// and a step's branch must be a branch of a split before it.
func (p *parser) branches(n *yaml.Node, steps []Step) {
	var split map[string]int
	at := -1
	for i, s := range steps {
		path := "steps[" + strconv.Itoa(i) + "]"
		if s.Kind == KindSplit {
			if split != nil {
				p.errorf(path, n.Content[i].Line, "is a second split: a sequence has at most one (steps[%d] is its split)", at)
				continue
			}
			split, at = s.Branches, i
			if split == nil {
				split = map[string]int{} // invalid, reported; later branches are not judged again
			}
			continue
		}
		if s.Branch == "" {
			continue
		}
		switch _, ok := split[s.Branch]; {
		case at < 0:
			p.errorf(path+".branch", p.lineOf(path+".branch"), "must name a branch of a split step before it, and there is none")
		case !ok && len(split) > 0:
			p.errorf(path+".branch", p.lineOf(path+".branch"), "must name a branch of the split at steps[%d]: %s", at,
				strings.Join(sortedKeys(split), ", "))
		}
	}
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// step parses one step into s and reports whether it carries an id key.
func (p *parser) step(path string, n *yaml.Node, s *Step) bool {
	if n.Kind != yaml.MappingNode {
		p.errorf(path, n.Line, "must be a mapping such as {send: welcome} or {delay: 1d}")
		return false
	}
	got := p.keyed(path, n, stepKeys, "a step")
	_, hasID := got["id"]
	if e, ok := got["id"]; ok {
		if id, ok := p.text(path+".id", e.line, e.val, true); ok {
			if ids.Valid(id) {
				s.ID = id
			} else {
				p.errorf(path+".id", e.line, "must be 1-64 letters, digits, _, . or -, starting with a letter or digit")
			}
		}
	}
	send, hasSend := got["send"]
	delay, hasDelay := got["delay"]
	split, hasSplit := got["split"]
	action, hasAction := got["action"]
	// allowed lists the keys of the step's form besides id.
	var allowed []string
	switch {
	case btoi(hasSend)+btoi(hasDelay)+btoi(hasSplit) > 1:
		p.errorf(path, n.Line, "has more than one of send, delay and split: a step sends, waits or splits")
		return hasID
	case (hasSend || hasDelay || hasSplit) && hasAction:
		p.errorf(path+".action", action.line, "cannot be combined with send, delay or split: use either the short form or action")
		return hasID
	case hasSend:
		s.Kind = KindEmail
		s.Template = p.templateID(path+".send", send)
		allowed = []string{"send", "conditions", "branch"}
	case hasDelay:
		s.Kind = KindDelay
		s.Delay, s.DelaySrc = p.duration(path+".delay", delay)
		allowed = []string{"delay", "branch"}
	case hasSplit:
		s.Kind = KindSplit
		s.Branches = p.split(path+".split", split)
		allowed = []string{"split"}
	case hasAction:
		kind, _ := p.text(path+".action", action.line, action.val, true)
		// field reads the long form's one field beside action, which each
		// kind requires.
		field := func(key, what string, read func(path string, e entry)) {
			if e, ok := got[key]; ok {
				read(path+"."+key, e)
			} else {
				p.errorf(path+"."+key, action.line, "is required: %s", what)
			}
		}
		switch Kind(kind) {
		case KindEmail:
			s.Kind = KindEmail
			field("template", "the template an email step sends", func(fp string, e entry) { s.Template = p.templateID(fp, e) })
			allowed = []string{"action", "template", "conditions", "branch"}
		case KindDelay:
			s.Kind = KindDelay
			field("duration", "how long a delay step waits, such as 1d", func(fp string, e entry) { s.Delay, s.DelaySrc = p.duration(fp, e) })
			allowed = []string{"action", "duration", "branch"}
		case KindSplit:
			s.Kind = KindSplit
			field("branches", "the branches and their weights, such as {a: 50, b: 50}", func(fp string, e entry) { s.Branches = p.split(fp, e) })
			allowed = []string{"action", "branches"}
		default:
			if kind != "" {
				p.errorf(path+".action", action.line, "must be email, delay or split")
			}
			return hasID
		}
	default:
		p.errorf(path, n.Line, "needs send: <template>, delay: <duration>, split: {<branch>: <weight>, ...} or action: email|delay|split")
		return hasID
	}
	for _, k := range stepKeys {
		e, ok := got[k]
		if !ok || k == "id" || contains(allowed, k) {
			continue
		}
		if k == "conditions" {
			p.errorf(path+".conditions", e.line, "apply to email steps only")
		} else {
			p.errorf(path+"."+k, e.line, "does not belong to %s step, which has %s", formName(s.Kind, hasAction), strings.Join(append([]string{"id"}, allowed...), ", "))
		}
	}
	if e, ok := got["conditions"]; ok && s.Kind == KindEmail && !isNull(e.val) {
		s.Conditions = p.rule(path+".conditions", e.line, e.val)
	}
	if e, ok := got["branch"]; ok && s.Kind != KindSplit {
		if b, ok := p.text(path+".branch", e.line, e.val, true); ok {
			if ids.Valid(b) {
				s.Branch = b
			} else {
				p.errorf(path+".branch", e.line, "must be a branch name of the split")
			}
		}
	}
	return hasID
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// split reads a split's branches: {a: 50, b: 50}, MinBranches to
// MaxBranches names (ids, not the reserved holdout or default) with whole
// weights of 1 to 99 percent summing to 100. Nil when invalid (reported).
func (p *parser) split(path string, e entry) map[string]int {
	if e.val.Kind != yaml.MappingNode {
		p.errorf(path, e.line, "must be a mapping of branch names to weights in percent, such as {a: 50, b: 50}")
		return nil
	}
	entries := p.mapping(path, e.val, nil, "")
	out := map[string]int{}
	ok := len(entries)*2 == len(e.val.Content) // duplicate or non-string keys, reported
	sum := 0
	for _, be := range entries {
		bp := join(path, shortKey(be.key))
		switch {
		case !ids.Valid(be.key):
			p.errorf(bp, be.line, "is not a branch name: 1-64 letters, digits, _, . or -, starting with a letter or digit")
			ok = false
			continue
		case be.key == BranchHoldout || be.key == BranchDefault:
			p.errorf(bp, be.line, "is reserved: %s and %s name the control group and a sequence without a split", BranchHoldout, BranchDefault)
			ok = false
			continue
		}
		w, err := strconv.Atoi(be.val.Value)
		if be.val.Kind != yaml.ScalarNode || be.val.ShortTag() != "!!int" || err != nil || w < 1 || w > 99 {
			p.errorf(bp, be.line, "must be a whole number of percent, 1 to 99")
			ok = false
			continue
		}
		out[be.key] = w
		sum += w
	}
	switch {
	case len(entries) < MinBranches || len(entries) > MaxBranches:
		p.errorf(path, e.line, "has %d branches: a split has %d to %d", len(entries), MinBranches, MaxBranches)
		return nil
	case !ok:
		return nil
	case sum != 100:
		p.errorf(path, e.line, "has weights summing to %d: they must sum to 100", sum)
		return nil
	}
	return out
}

// formName names a step's form in messages.
func formName(k Kind, long bool) string {
	switch {
	case long:
		return "an action: " + string(k)
	case k == KindEmail:
		return "a send"
	case k == KindSplit:
		return "a split"
	}
	return "a delay"
}

func (p *parser) templateID(path string, e entry) string {
	id, ok := p.text(path, e.line, e.val, true)
	if !ok {
		return ""
	}
	if !ids.Valid(id) {
		p.errorf(path, e.line, "must be a template id: 1-64 letters, digits, _, . or -, starting with a letter or digit")
		return ""
	}
	return id
}

func (p *parser) duration(path string, e entry) (time.Duration, string) {
	src, ok := p.text(path, e.line, e.val, true)
	if !ok {
		return 0, ""
	}
	d, err := rules.ParseDuration(src)
	switch {
	case err != nil:
		p.errorf(path, e.line, "must be a positive whole number and a unit s, m, h, d or w, such as 30m, 1d or 2w")
		return 0, ""
	case d > MaxDelay:
		p.errorf(path, e.line, "must be at most %s", rules.FormatDuration(MaxDelay))
		return 0, ""
	}
	return d, src
}

// rule parses a rule node through package rules. The YAML is converted to
// the document rules.Parse reads; the paths of its errors are mapped back
// to YAML lines.
func (p *parser) rule(path string, line int, n *yaml.Node) *rules.Node {
	p.lines[path] = line
	doc, ok := p.value(path, n)
	if !ok {
		return nil
	}
	node, err := rules.Parse(doc, rules.Options{Root: path})
	var verr *rules.ValidationError
	switch {
	case errors.As(err, &verr):
		for _, f := range verr.Fields {
			p.errorf(f.Path, p.lineOf(f.Path), "%s", f.Message)
		}
		return nil
	case err != nil:
		p.errorf(path, line, "%v", err)
		return nil
	}
	return node
}

// lineOf is the line of path, or of its nearest ancestor the YAML has (a
// missing key is reported where its mapping is).
func (p *parser) lineOf(path string) int {
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return 0
		}
		path = path[:i]
	}
}

// value converts a YAML node below a rule root into the document
// rules.Parse reads, recording the line of every path. Strings and
// timestamps keep their text (2024-05-01 stays the string the user wrote);
// numbers become json.Number with their exact text when it is JSON, and
// YAML's reading otherwise (0x1F, .inf, which rules then judges).
func (p *parser) value(path string, n *yaml.Node) (any, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		ok := true
		for _, e := range p.mapping(path, n, nil, "") {
			v, vok := p.value(join(path, e.key), e.val)
			m[e.key] = v
			ok = ok && vok
		}
		// mapping reports duplicate and non-string keys; they fail the tree.
		return m, ok && len(m)*2 == len(n.Content)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		ok := true
		for i, c := range n.Content {
			cpath := path + "[" + strconv.Itoa(i) + "]"
			p.lines[cpath] = c.Line
			v, vok := p.value(cpath, c)
			out[i] = v
			ok = ok && vok
		}
		return out, ok
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			p.errorf(path, n.Line, "is not a boolean")
			return nil, false
		}
		return b, true
	case "!!int", "!!float":
		if rules.IsJSONNumber(n.Value) {
			return json.Number(n.Value), true
		}
		var v any
		if err := n.Decode(&v); err != nil {
			p.errorf(path, n.Line, "is not a number YAML can read")
			return nil, false
		}
		return v, true
	}
	return n.Value, true
}

// warnings lists what is valid but probably not meant.
func warnings(d *Definition) []string {
	if len(d.EmailSteps()) == 0 {
		return []string{"steps: the sequence has no email step, so it sends nothing"}
	}
	last := len(d.Steps) - 1
	for d.Steps[last].Kind == KindDelay {
		last--
	}
	if trailing := len(d.Steps) - 1 - last; trailing > 0 {
		return []string{fmt.Sprintf("steps[%d]: a delay after the last email step only postpones the sequence's completion", last+1)}
	}
	return nil
}

// yamlContextLine reads the line yaml.v3 names in an error ("line 4: ...").
var yamlContextLine = regexp.MustCompile(`^line (\d+): did not find expected`)

// misindented points at the line a "did not find expected ..." error is
// about. yaml.v3 names the line where the enclosing block starts (its
// context mark), which can be several lines above the mistake, and does not
// export the problem's own position. The block's entries are indented like
// its first entry; the first later line indented less than that (but
// deeper than the block's key), or at the same indentation without the
// "- " a sequence's entries start with, is out of step. When the named line
// is itself a sequence entry, its siblings are the block. 0 when none is
// found.
func misindented(src []byte, msg string) int {
	m := yamlContextLine.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	start, _ := strconv.Atoi(m[1])
	lines := strings.Split(string(src), "\n")
	if start < 1 || start > len(lines) {
		return 0
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	content := func(l string) bool { t := strings.TrimSpace(l); return t != "" && !strings.HasPrefix(t, "#") }
	parent := indent(lines[start-1])
	entry, seq := -1, false
	if strings.HasPrefix(strings.TrimSpace(lines[start-1]), "- ") {
		// The context is an entry of a sequence: its siblings are the block,
		// and its parent is the nearest line above indented less.
		entry, seq, parent = parent, true, -1
		for i := start - 2; i >= 0; i-- {
			if content(lines[i]) && indent(lines[i]) < entry {
				parent = indent(lines[i])
				break
			}
		}
	}
	for i := start; i < len(lines); i++ {
		l := lines[i]
		if !content(l) {
			continue
		}
		in := indent(l)
		if entry < 0 {
			entry, seq = in, strings.HasPrefix(strings.TrimSpace(l), "- ")
			continue
		}
		switch {
		case in <= parent:
			return 0 // the block ended without a line out of step
		case in < entry, in == entry && seq && !strings.HasPrefix(strings.TrimSpace(l), "-"):
			return i + 1
		}
	}
	return 0
}
