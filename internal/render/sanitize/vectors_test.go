package sanitize

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// xssCorpus is testdata/xss: public XSS vectors (see its README).
type corpusVector struct{ Name, Vector string }

func loadCorpus(t testing.TB) []corpusVector {
	t.Helper()
	var out []corpusVector
	f, err := os.Open(filepath.Join("testdata", "xss", "h5sc.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v struct {
			ID     int    `json:"id"`
			Name   string `json:"name"`
			Vector string `json:"vector"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusVector{fmt.Sprintf("h5sc-%d", v.ID), v.Vector})
	}
	pb, err := os.ReadFile(filepath.Join("testdata", "xss", "payloadbox.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(pb), "\n"), "\n") {
		out = append(out, corpusVector{fmt.Sprintf("payloadbox-%d", i+1), line})
	}
	return out
}

// cdataVectors are the class issue 10 found getting through the tokenizer
// denylist: CDATA sections and other foreign-content tricks, where a
// browser's tree builder and the tokenizer read different markup.
var cdataVectors = []corpusVector{
	{"svg cdata image breakout", `<svg><![CDATA[><image xlink:href="]]><img src=x onerror=alert(1)//"></svg>`},
	{"svg cdata javascript link", `<svg><![CDATA[><a title="]]><a href="javascript:alert(1)">click</a>"></svg>`},
	{"math cdata breakout", `<math><![CDATA[><mi title="]]><img src=x onerror=alert(1)>"></math>`},
	{"cdata hides the end tag", `<svg><![CDATA[</svg>]]><img src=x onerror=alert(1)>`},
	{"cdata ends the svg for the tokenizer only", `<svg><![CDATA[x>y</svg>]]><img src=x onerror=alert(1)>`},
	{"svg style cdata", `<svg><style><![CDATA[</style><img src=x onerror=alert(1)>]]></style></svg>`},
	{"mglyph style mutation", `<math><mtext><table><mglyph><style><![CDATA[</style><img title="]]></mglyph><img src=1 onerror=alert(1)>">`},
	{"svg style after p", `<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">`},
	{"form math mutation", `<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>`},
	{"svg animate href", `<svg><a><![CDATA[ ]]><animate attributeName="href" values="javascript:alert(1)"/><text>x</text></a></svg>`},
	{"svg use data", `<svg><use href="data:image/svg+xml,&lt;svg id='x' xmlns='http://www.w3.org/2000/svg'&gt;&lt;image href='1' onerror='alert(1)' /&gt;&lt;/svg&gt;#x"/></svg>`},
	{"math xlink", `<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">x</maction></math>`},
	{"namespaced script", `<html xmlns:x="http://www.w3.org/1999/xhtml"><x:script>alert(1)</x:script></html>`},
	{"noscript mutation", `<noscript><p title="</noscript><img src=x onerror=alert(1)>">`},
	{"frameset", `<frameset onload=alert(1)><frame src="javascript:alert(2)"></frameset>`},
	{"applet", `<applet code="x" codebase="javascript:alert(1)"><param name=a value=b>fallback</applet>`},
	{"base", `<base href="javascript:alert(1)//"><a href="/x">x</a>`},
	{"folder", `<a style="behavior:url(#default#AnchorClick);" folder="javascript:alert(1)">x</a>`},
	{"template", `<template><img src=x onerror=alert(1)></template>`},
	{"comment in cdata", `<svg><![CDATA[<!--]]><img src=x onerror=alert(1)>-->`},
}
