package render

import (
	"context"
	"strings"
	"testing"
)

// TestJudgeCatchesWhatTheTokenizerMissed: the vectors that got through the
// tokenizer denylist are caught by judge as they are.
func TestJudgeCatchesWhatTheTokenizerMissed(t *testing.T) {
	t.Parallel()
	for _, v := range cdataVectors {
		if d := judge(v.vector, judgeMode{liquid: true}); d == "" {
			t.Errorf("judge passes %s: %q", v.name, v.vector)
		}
	}
}

func TestJudgeAcceptsLiquidAsABrowserReadsIt(t *testing.T) {
	t.Parallel()
	in := `<td {% if x %}bgcolor="red"{% endif %}><a href="{{ u | append: "?a=1" }}">x</a></td>`
	if d := judge(in, judgeMode{liquid: true}); d != "" {
		t.Errorf("template: %s", d)
	}
	if d := judge(in, judgeMode{}); d == "" {
		t.Error("a rendered message gets no Liquid allowances")
	}
}

// TestRenderSanitisesOldVersions: a version saved under the denylist
// sanitiser (which kept the CDATA vector and <frameset>) is sanitised again
// when a Renderer first parses it.
func TestRenderSanitisesOldVersions(t *testing.T) {
	t.Parallel()
	old := `<p>Hi {{ name }}</p><svg><![CDATA[><image xlink:href="]]><img src=x onerror=alert(1)//"></svg><frameset><frame ></frameset><a folder="javascript:alert(1)">x</a>`
	r := NewRenderer(RendererOptions{})
	m, err := r.Render(context.Background(), "old", 1, "Hi", old, map[string]any{"name": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if d := judge(m.HTML, judgeMode{}); d != "" {
		t.Errorf("%s in %q", d, m.HTML)
	}
	if !strings.Contains(m.HTML, "Hi Ada") {
		t.Errorf("html = %q", m.HTML)
	}
}

// TestCleanMessageFallsBackToTheTree: rebuildMessage keeps what the
// allowlist allows of the browser's tree.
func TestCleanMessageFallsBackToTheTree(t *testing.T) {
	t.Parallel()
	got := rebuildMessage(`<p class="a" onclick="x()">Hi <svg><![CDATA[><a title="]]><img src=x onerror=alert(1)>"></svg><marquee>there</marquee></p>`)
	if d := judge(got, judgeMode{}); d != "" {
		t.Errorf("%s in %q", d, got)
	}
	if !strings.Contains(got, `<p class="a">Hi <img src="x"/>`) || !strings.Contains(got, `there</p>`) {
		t.Errorf("got %q", got)
	}
}
