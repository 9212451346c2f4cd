package delivery

import (
	"strings"
	"time"
)

// Machine opens and clicks (ADDENDUM 17). Apple Mail Privacy Protection
// and webmail image proxies fetch a message's pixel when it arrives;
// corporate link scanners follow every link before the recipient sees the
// message. Counting those as engagement fires gates, sequences and
// segments for nobody. Our pixel and click redirect classify each hit with
// Machine; a provider's event carries the provider's own flag instead
// (SendGrid sg_machine_open).

// Hit is one open or click as our pixel or redirect saw it.
type Hit struct {
	Click     bool
	Method    string
	UserAgent string
	// At is the hit's time; SentAt the message's.
	At, SentAt time.Time
	// FirstClickAt is the message's first click before this one (clicks;
	// nil for none).
	FirstClickAt *time.Time
}

// Why a hit is a machine's.
const (
	MachineHEAD      = "head_request"       // a HEAD: a prefetcher checking the URL, never a mail client showing it
	MachineNoAgent   = "no_user_agent"      // every mail client and browser sends one
	MachineScanner   = "scanner_user_agent" // a user agent of a known scanner or prefetcher (machineAgents)
	MachineTooSoon   = "within_2s_of_send"  // nobody reads a message within 2 s of its sending; proxies fetch on arrival
	MachineClickRush = "click_burst"        // a second click within 1 s of the message's first: scanners follow every link at once
)

// machineWindow and clickBurst are the timing rules' bounds.
const (
	machineWindow = 2 * time.Second
	clickBurst    = time.Second
)

// machineAgents are user-agent fragments (matched case-insensitively) of
// mail security scanners, link checkers, prefetching proxies and HTTP
// libraries. Gmail's GoogleImageProxy is not here: it fetches when the
// recipient opens the message, so its opens are people's (its prefetch on
// arrival is caught by the timing rule).
var machineAgents = []string{
	"bot", "crawler", "spider", "preview", "scanner",
	"barracuda", "mimecast", "proofpoint", "ppops", "messagelabs", "symantec", "trend micro", "trendmicro",
	"forcepoint", "sophos", "ironport", "cisco", "zscaler", "fortiguard", "fortinet", "checkpoint", "check point",
	"paloalto", "palo alto", "safelinks", "defender", "kaspersky", "bitdefender", "avast", "mcafee",
	"yahoomailproxy", "headlesschrome", "phantomjs", "python-requests", "python-urllib", "go-http-client",
	"curl/", "wget/", "java/", "okhttp", "apache-httpclient", "libwww-perl", "axios/", "node-fetch",
}

// Machine says whether a hit is a machine's, and why ("" for a person's).
// The rules, in order: a HEAD request, no user agent, a known machine's
// user agent, within 2 s of the message's sending, a click within 1 s of
// the message's first click. The first click of a scanner's burst counts
// as a person's unless another rule catches it; the rest of the burst do
// not.
func Machine(h Hit) string {
	if strings.EqualFold(h.Method, "HEAD") {
		return MachineHEAD
	}
	ua := strings.ToLower(strings.TrimSpace(h.UserAgent))
	if ua == "" {
		return MachineNoAgent
	}
	for _, frag := range machineAgents {
		if strings.Contains(ua, frag) {
			return MachineScanner
		}
	}
	if !h.SentAt.IsZero() && h.At.Sub(h.SentAt) < machineWindow {
		return MachineTooSoon
	}
	if h.Click && h.FirstClickAt != nil {
		if d := h.At.Sub(*h.FirstClickAt); d >= 0 && d < clickBurst {
			return MachineClickRush
		}
	}
	return ""
}
