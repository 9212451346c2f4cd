package render

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unsafe"

	"github.com/osteele/liquid/parser"

	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
)

// A skeleton renders a template version faster than the template itself. It
// is the template with two changes:
//
//   - Long runs of literal HTML (MJML's markup between two pieces of Liquid,
//     often kilobytes) are replaced by short markers, expanded after Liquid
//     has run. Liquid copies text several times on its way to the writer, and
//     mayNeedSanitize need not read the runs on every send: for each run it
//     reads only the ends.
//   - When the template allows (see textSegments), it also yields the text
//     part: every value is marked in the output, and before each Liquid tag a
//     marker asks for the text of the stretch just rendered, which was made
//     from the HTML once, by html2text. So Liquid runs once per message, not
//     once for the HTML and again for the text.
type skeleton struct {
	tmpl   *liquid.Template
	marker []byte // starts every marker; random, so no value can forge one
	chunks []chunk
	// text holds, for each stretch of the template between two tags, its
	// text part; nil when the text comes from elsewhere.
	text [][]textPiece
}

// chunk is one run of literal HTML a marker stands for.
type chunk struct {
	text string
	// guard is what mayNeedSanitize reads in place of text: its start up to
	// the first '>' past minEdge and its end from the last '>' before
	// minEdge from the end. No pattern mayNeedSanitize looks for contains a
	// '>', so one that crosses into or out of the run lies within these
	// ends; the middle, checked when the skeleton is made, has none.
	guard string
}

// textPiece is literal text, or (when literal is empty) the text of the
// value'th value of its stretch.
type textPiece struct {
	literal string
	value   int
}

// Marker kinds follow the random marker prefix.
const (
	markChunk    = 'C' // C<number>\xfe: chunk
	markValue    = 'V' // V<value><marker>v: a value
	markValueEnd = 'v'
	markText     = 'T' // T<number>\xfe: the text of a stretch
	// markEnd ends numbers. Like the marker's first byte it is not UTF-8,
	// so Liquid's whitespace trimming never takes it for a space.
	markEnd = 0xfe
)

const (
	// minChunk is the shortest run worth a marker.
	minChunk = 256
	// minEdge is how much of each end of a run mayNeedSanitize reads at
	// least.
	minEdge = 64
)

// newSkeleton makes the skeleton of a compiled template, or returns nil when
// that would not pay or not be exact: no long runs and no text part, or a
// run that by itself makes mayNeedSanitize say yes (every message is
// sanitised then anyway, from the whole HTML).
func newSkeleton(html string) *skeleton {
	// The marker is 0xff and 15 random bytes from 0x80-0xbf: 90 bits no
	// value can guess, and nothing Liquid's scanner or trimming reacts to.
	var nonce [15]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand's Read does not fail
	s := &skeleton{marker: []byte{0xff}}
	for _, b := range nonce {
		s.marker = append(s.marker, 0x80|b&0x3f)
	}
	tokens := parser.Scan(html, parser.SourceLoc{}, nil)
	s.text = textSegments(html, tokens)
	withText := s.text != nil

	var src bytes.Buffer
	src.Grow(len(html) / 4)
	mark := func(kind byte, n int) {
		src.Write(s.marker)
		src.WriteByte(kind)
		src.WriteString(strconv.Itoa(n))
		src.WriteByte(markEnd)
	}
	captures, stretch := 0, 0
	for _, t := range tokens {
		switch t.Type {
		case parser.TagTokenType:
			if withText && captures == 0 {
				mark(markText, stretch)
			}
			stretch++
			switch t.Name {
			case "capture":
				captures++
			case "endcapture":
				captures--
			}
			src.WriteString(t.Source)
		case parser.ObjTokenType:
			if !withText || captures > 0 {
				src.WriteString(t.Source)
				break
			}
			src.Write(s.marker)
			src.WriteByte(markValue)
			src.WriteString(t.Source)
			src.Write(s.marker)
			src.WriteByte(markValueEnd)
		case parser.TextTokenType:
			// Leading and trailing white space stay literal, so that
			// {%- -%} trims exactly what it would have. Text inside
			// {% capture %} stays: filters may work on it.
			body := strings.TrimFunc(t.Source, unicode.IsSpace)
			if captures > 0 || len(body) < minChunk {
				src.WriteString(t.Source)
				break
			}
			if sanitize.MayNeed(body) {
				return nil
			}
			lead := strings.Index(t.Source, body)
			src.WriteString(t.Source[:lead])
			mark(markChunk, len(s.chunks))
			src.WriteString(t.Source[lead+len(body):])
			s.chunks = append(s.chunks, chunk{text: body, guard: guardEnds(body)})
		}
	}
	if withText {
		mark(markText, stretch)
	}
	if len(s.chunks) == 0 && !withText {
		return nil
	}
	tmpl, err := liquid.ParseDerived(src.String(), nil)
	if err != nil {
		return nil
	}
	s.tmpl = tmpl
	return s
}

// guardEnds returns the two ends of a run that mayNeedSanitize has to see;
// see chunk.guard.
func guardEnds(text string) string {
	head := strings.IndexByte(text[min(minEdge, len(text)):], '>')
	tail := strings.LastIndexByte(text[:max(0, len(text)-minEdge)], '>')
	if head < 0 || tail < 0 {
		return text
	}
	head += minEdge + 1 // just past the '>'
	if tail < head {
		return text
	}
	return text[:head] + text[tail:]
}

// textTags are the tags a template may use for its skeleton to yield the
// text part: they write nothing themselves. (cycle and tablerow write
// output; raw would make tags inside it look like control flow.)
var textTags = map[string]bool{
	"if": true, "elsif": true, "else": true, "endif": true, "unless": true, "endunless": true,
	"case": true, "when": true, "endcase": true, "for": true, "endfor": true,
	"break": true, "continue": true, "assign": true, "capture": true, "endcapture": true,
	"comment": true, "endcomment": true,
}

// textSegments converts the template's HTML to text once, with html2text,
// with placeholders standing in for the Liquid, and cuts the result at the
// tags into the text of each stretch between two tags. It returns nil when
// the text cannot be put together from those stretches exactly: whitespace
// control, a tag that writes output, a tag html2text dropped (one in <head>
// or in an attribute other than href) or moved, or a value it moved into
// another stretch (an href whose link text holds a tag).
func textSegments(html string, tokens []parser.Token) [][]textPiece {
	var b strings.Builder
	b.Grow(len(html))
	var stretchOf, indexInStretch []int // per Liquid token
	var isTag []bool
	stretch, values := 0, 0
	for _, t := range tokens {
		switch t.Type {
		case parser.TrimLeftTokenType, parser.TrimRightTokenType:
			return nil
		case parser.TextTokenType:
			b.WriteString(t.Source)
			continue
		case parser.TagTokenType:
			if !textTags[t.Name] {
				return nil
			}
		}
		b.WriteString(placeholderOpen + strconv.Itoa(len(isTag)) + placeholderClose)
		stretchOf = append(stretchOf, stretch)
		indexInStretch = append(indexInStretch, values)
		isTag = append(isTag, t.Type == parser.TagTokenType)
		if t.Type == parser.TagTokenType {
			stretch++
			values = 0
		} else {
			values++
		}
	}
	if strings.Contains(html, placeholderOpen) {
		return nil
	}
	text := HTMLToText(b.String())

	segments := make([][]textPiece, stretch+1)
	current, nextTag := 0, 0
	for len(text) > 0 {
		loc := placeholderRE.FindStringSubmatchIndex(text)
		if loc == nil {
			segments[current] = append(segments[current], textPiece{literal: text})
			break
		}
		if loc[0] > 0 {
			segments[current] = append(segments[current], textPiece{literal: text[:loc[0]]})
		}
		id, _ := strconv.Atoi(text[loc[2]:loc[3]])
		text = text[loc[1]:]
		switch {
		case isTag[id]:
			// Tags must come through once each and in order.
			for nextTag < len(isTag) && !isTag[nextTag] {
				nextTag++
			}
			if id != nextTag {
				return nil
			}
			nextTag++
			current++
		case stretchOf[id] != current:
			return nil
		default:
			segments[current] = append(segments[current], textPiece{value: indexInStretch[id]})
		}
	}
	for ; nextTag < len(isTag); nextTag++ {
		if isTag[nextTag] {
			return nil
		}
	}
	return segments
}

// errBadMarker means a skeleton's output did not have the markers it was
// made with; it is a bug, not a problem with the template.
var errBadMarker = errors.New("render: skeleton output has a malformed marker")

// rendered is a rendered message's HTML and, when the skeleton made it,
// its text part.
type rendered struct {
	html string
	text string
	// sanitize is mayNeedSanitize's verdict on html.
	sanitize bool
}

// expand puts a rendered skeleton together, or returns liquid.ErrTooLarge. Scratch
// space comes from pool.
func (s *skeleton) expand(out []byte, maxOutput int, pool *sync.Pool) (rendered, error) {
	htmlSize, guardSize := len(out), len(out)
	for rest := out; ; {
		i := bytes.Index(rest, s.marker)
		if i < 0 {
			break
		}
		rest = rest[i+len(s.marker):]
		if len(rest) > 0 && rest[0] == markChunk {
			if n, read := s.number(rest[1:], len(s.chunks)); n >= 0 {
				htmlSize += len(s.chunks[n].text)
				guardSize += len(s.chunks[n].guard)
				rest = rest[1+read:]
			}
		}
	}
	if htmlSize > maxOutput {
		return rendered{}, liquid.ErrTooLarge
	}

	var html strings.Builder
	html.Grow(htmlSize)
	guard := pool.Get().(*bytes.Buffer)
	defer pool.Put(guard)
	guard.Reset()
	guard.Grow(guardSize)
	text := pool.Get().(*bytes.Buffer)
	defer pool.Put(text)
	text.Reset()
	var values [][2]int // of the current stretch, as offsets in out
	write := func(b []byte) {
		html.Write(b)
		guard.Write(b)
	}
	pos := 0 // out[:pos] is done
	for {
		i := bytes.Index(out[pos:], s.marker)
		if i < 0 || pos+i+len(s.marker) >= len(out) {
			write(out[pos:])
			break
		}
		write(out[pos : pos+i])
		pos += i + len(s.marker)
		kind := out[pos]
		pos++
		switch kind {
		case markChunk:
			n, read := s.number(out[pos:], len(s.chunks))
			if n < 0 {
				return rendered{}, errBadMarker
			}
			html.WriteString(s.chunks[n].text)
			guard.WriteString(s.chunks[n].guard)
			pos += read
		case markValue:
			end := bytes.Index(out[pos:], s.marker)
			if end < 0 || pos+end+len(s.marker) >= len(out) || out[pos+end+len(s.marker)] != markValueEnd {
				return rendered{}, errBadMarker
			}
			write(out[pos : pos+end])
			values = append(values, [2]int{pos, pos + end})
			pos += end + len(s.marker) + 1
		case markText:
			n, read := s.number(out[pos:], len(s.text))
			if n < 0 {
				return rendered{}, errBadMarker
			}
			for _, p := range s.text[n] {
				switch {
				case p.literal != "":
					text.WriteString(p.literal)
				case p.value < len(values):
					v := values[p.value]
					text.WriteString(valueToText(bytesAsString(out[v[0]:v[1]])))
				}
			}
			values = values[:0]
			pos += read
		default:
			return rendered{}, errBadMarker
		}
	}
	r := rendered{html: html.String(), sanitize: sanitize.MayNeed(bytesAsString(guard.Bytes()))}
	if s.text != nil {
		r.text = tidyText(bytesAsString(text.Bytes()))
	}
	return r, nil
}

// bytesAsString views b as a string without copying. The caller must not
// change b while the string is in use, and must not keep the string: every
// use here reads it, or copies it, before the buffer goes back to its pool.
func bytesAsString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// number reads "<number>\xfe" at the start of b, below limit, returning it
// and the bytes read, or -1.
func (s *skeleton) number(b []byte, limit int) (n, read int) {
	for read < len(b) && '0' <= b[read] && b[read] <= '9' && read < 9 {
		n = n*10 + int(b[read]-'0')
		read++
	}
	if read == 0 || read >= len(b) || b[read] != markEnd || n >= limit {
		return -1, 0
	}
	return n, read + 1
}
