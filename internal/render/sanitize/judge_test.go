package sanitize

import (
	"strings"
	"testing"
)

// TestJudgeCatchesWhatTheTokenizerMissed: the vectors that got through the
// tokenizer denylist are caught by judge as they are.
func TestJudgeCatchesWhatTheTokenizerMissed(t *testing.T) {
	t.Parallel()
	for _, v := range cdataVectors {
		if d := Judge(v.Vector, Mode{Liquid: true}); d == "" {
			t.Errorf("judge passes %s: %q", v.Name, v.Vector)
		}
	}
}

func TestJudgeAcceptsLiquidAsABrowserReadsIt(t *testing.T) {
	t.Parallel()
	in := `<td {% if x %}bgcolor="red"{% endif %}><a href="{{ u | append: "?a=1" }}">x</a></td>`
	if d := Judge(in, Mode{Liquid: true}); d != "" {
		t.Errorf("template: %s", d)
	}
	if d := Judge(in, Mode{}); d == "" {
		t.Error("a rendered message gets no Liquid allowances")
	}
}

// TestCleanMessageFallsBackToTheTree: rebuildMessage keeps what the
// allowlist allows of the browser's tree.
func TestCleanMessageFallsBackToTheTree(t *testing.T) {
	t.Parallel()
	got := rebuildMessage(`<p class="a" onclick="x()">Hi <svg><![CDATA[><a title="]]><img src=x onerror=alert(1)>"></svg><marquee>there</marquee></p>`)
	if d := Judge(got, Mode{}); d != "" {
		t.Errorf("%s in %q", d, got)
	}
	if !strings.Contains(got, `<p class="a">Hi <img src="x"/>`) || !strings.Contains(got, `there</p>`) {
		t.Errorf("got %q", got)
	}
}
