package analyze

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/berth-node/berth/init/report"
)

// Chart geometry, in SVG user units.
const (
	svgWidth   = 1100
	labelWidth = 300
	plotRight  = svgWidth - 20
	rowHeight  = 22
	barHeight  = 16
	headHeight = 74
	maxTicks   = 20
	// maxChartMs bounds the time axis: a day is longer than any boot.
	maxChartMs = 24 * 3600 * 1000
)

// colours per bar kind; waits are drawn apart: grey over berth's phases,
// amber for the services and imports, which are entirely outside berth.
var fill = map[Kind]string{
	KindKernel:  "#b0b0b0",
	KindPhase:   "#3b73b9",
	KindService: "#e0a030",
	KindImage:   "#d08020",
	KindWait:    "#8a8a8a",
}

// WriteSVG writes the boot chart: a row per phase and service and lanes
// for the image imports (Rows), in start order on a time axis (ms since
// kernel start), the waits
// outside berth drawn over the phases they happened in, and two lanes at
// the bottom splitting berth's part of boot into its own work and waits.
// Bars carry class (their Kind) and data-start-ms, for tools and tests.
func WriteSVG(w io.Writer, b *Boot) error {
	c := newChart(b)
	c.head()
	c.axis()
	c.drawBars()
	c.splitLanes()
	c.milestones()
	if c.s.err != nil {
		return c.s.err
	}
	_, err := w.Write(c.s.buf.Bytes())
	return err
}

// chart is one boot chart being drawn: the report, what analyze made of
// it, and the scale. Rows are drawn top to bottom; row is the current one.
type chart struct {
	s      svgBuf
	r      *report.Report
	bars   []Bar
	split  report.Split
	chains []Chain
	// endMs is the axis's end, a whole number of steps.
	endMs, step int64
	rowOf       []int
	firstOfRow  []int
	barRows     int
	top, bottom int
	row         int
}

func newChart(b *Boot) *chart {
	c := &chart{r: b.Report, bars: Bars(b), split: Split(b), chains: Chains(b)}
	endMs := max(c.r.EndMs, c.r.RegisteredMs)
	for _, x := range c.bars {
		endMs = max(endMs, x.EndMs())
	}
	// A report is outside input: keep the axis sane whatever it says.
	endMs = min(max(endMs, 1), maxChartMs)
	c.step = tickStep(endMs)
	c.endMs = (endMs/c.step + 1) * c.step
	c.rowOf, c.firstOfRow, c.barRows = Rows(c.bars)
	rows := 1 + c.barRows + 2 // kernel, bars, the two split lanes
	c.top, c.bottom = headHeight, headHeight+rows*rowHeight
	return c
}

func (c *chart) xOf(ms int64) float64 {
	return labelWidth + float64(ms)*float64(plotRight-labelWidth)/float64(c.endMs)
}

func (c *chart) wOf(ms int64) float64 {
	return max(float64(ms)*float64(plotRight-labelWidth)/float64(c.endMs), 1)
}

// y is the top of the current row's bar.
func (c *chart) y() int { return headHeight + c.row*rowHeight + (rowHeight-barHeight)/2 }

// label writes the current row's name, left of the plot.
func (c *chart) label(text string) { c.s.text(labelWidth-8, c.y()+barHeight-4, "l", text) }

// bar draws x on the current row, with its numbers as data attributes and
// a tooltip.
func (c *chart) bar(x Bar, class Kind) {
	cls := string(class)
	if x.Failed {
		cls += " failed"
	}
	c.s.f(`<rect class="%s" data-name="%s" data-start-ms="%d" data-duration-ms="%d" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s">`,
		cls, esc(x.Name), x.StartMs, x.DurationMs, c.xOf(x.StartMs), c.y(), c.wOf(x.DurationMs), barHeight, fill[class])
	tip := fmt.Sprintf("%s @%d ms +%d ms", x.label(), x.StartMs, x.DurationMs)
	if x.Note != "" {
		tip += ": " + x.Note
	}
	c.s.f(`<title>%s</title></rect>`, esc(tip))
}

// head is the XML prolog, the styles, the title and the legend.
func (c *chart) head() {
	r, s := c.r, &c.s
	height := c.bottom + 40
	s.f(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height, svgWidth, height)
	s.f(`<style>text.l{text-anchor:end} text.d{fill:#333} rect.wait{fill-opacity:0.85} .failed{stroke:#c00;stroke-width:2}</style>` + "\n")
	s.f(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="3" height="6" fill="%s"/></pattern></defs>`+"\n", fill[KindWait])
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := fmt.Sprintf("berth %s boot %s: kernel → berth %d ms, berth %d ms (own work %d ms, waits %d ms)",
		r.Version, orDash(r.BootID), r.KernelToInitMs, r.EndMs-r.KernelToInitMs, c.split.BerthMs, c.split.WaitMs)
	if !r.OK {
		title += ", FAILED: " + oneLine(r.Error)
	}
	s.text(10, 20, "title", title)
	legend := []struct {
		kind  Kind
		label string
	}{
		{KindPhase, "berth's phases"},
		{KindWait, "waits outside berth (DHCP, IMDS, mkfs, NTP, containerd, imports, kubelet)"},
		{KindService, "services, first exec to ready"},
		{KindImage, "image imports"},
	}
	lx := 10.0
	for _, l := range legend {
		s.f(`<rect x="%.1f" y="32" width="12" height="12" fill="%s"/>`, lx, fill[l.kind])
		s.text(lx+16, 42, "legend", l.label)
		lx += 30 + 6.5*float64(len(l.label))
	}
	s.f("\n")
}

// axis is a grid line and a label per tick.
func (c *chart) axis() {
	s := &c.s
	s.f(`<g id="axis" stroke="#ddd">`)
	for t := int64(0); t <= c.endMs; t += c.step {
		x := c.xOf(t)
		s.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, x, c.top-6, x, c.bottom)
		s.f(`<text x="%.1f" y="%d" stroke="none" fill="#555" text-anchor="middle">%s</text>`, x, c.top-10, tickLabel(t))
	}
	s.f("</g>\n")
}

// drawBars draws the kernel's row, then each bar on the row Rows gave it:
// phases with their waits over them, services, and the image imports'
// lanes.
func (c *chart) drawBars() {
	s := &c.s
	c.row = 0
	s.f(`<g id="bars">` + "\n")
	c.label("kernel → berth")
	c.bar(Bar{Name: "kernel", Kind: KindKernel, DurationMs: c.r.KernelToInitMs}, KindKernel)
	s.f("\n")
	// An import lane's label and notes name its imports, written once
	// all are drawn so that no note lies under a later import's bar.
	laneNotes := map[int][]string{}
	laneStart, laneEnd := map[int]int64{}, map[int]int64{}
	lanes := 0
	for i, x := range c.bars {
		c.row = 1 + c.rowOf[i]
		if x.Kind == KindImage {
			if c.firstOfRow[c.row-1] == i {
				lanes++
				name := "image imports"
				if lanes > 1 {
					name = fmt.Sprintf("image imports, lane %d", lanes)
				}
				c.label(name)
				laneStart[c.row] = x.StartMs
			}
			c.bar(x, x.Kind)
			// The name's last element: the tooltip has it whole.
			note := fmt.Sprintf("%s %d ms", x.Name[strings.LastIndex(x.Name, "/")+1:], x.DurationMs)
			if x.Note != "" {
				note += " (" + oneLine(x.Note) + ")"
			}
			laneNotes[c.row] = append(laneNotes[c.row], note)
			laneEnd[c.row] = max(laneEnd[c.row], x.EndMs())
			s.f("\n")
			continue
		}
		c.label(x.label())
		c.bar(x, x.Kind)
		if x.Kind == KindPhase {
			c.phaseWaits(x.Name)
		}
		note := fmt.Sprintf("%d ms", x.DurationMs)
		if x.Note != "" {
			note += "  " + oneLine(x.Note)
		}
		if c.xOf(x.EndMs()) > labelWidth+0.7*(plotRight-labelWidth) {
			// No room after the bar: the note goes before it.
			s.text(c.xOf(x.StartMs)-4, c.y()+barHeight-4, "d l", clip(note, 60))
		} else {
			s.text(c.xOf(x.EndMs())+4, c.y()+barHeight-4, "d", clip(note, 60))
		}
		s.f("\n")
	}
	for _, r := range slices.Sorted(maps.Keys(laneNotes)) {
		c.row = r
		note := clip(strings.Join(laneNotes[r], ", "), 90)
		if c.xOf(laneEnd[r]) > labelWidth+0.5*(plotRight-labelWidth) {
			// No room after the lane: the notes go before its first bar.
			s.text(c.xOf(laneStart[r])-4, c.y()+barHeight-4, "d l", note)
		} else {
			s.text(c.xOf(laneEnd[r])+4, c.y()+barHeight-4, "d", note)
		}
		s.f("\n")
	}
	c.row = 1 + c.barRows
	s.f("</g>\n")
}

// phaseWaits draws the waits of the named phase over its bar (the
// services' and imports' waits have bars of their own).
func (c *chart) phaseWaits(phase string) {
	for _, wt := range c.split.Waits {
		if wt.Phase != phase || IsServiceWait(wt.Name) || IsImportWait(wt.Name) {
			continue
		}
		c.s.f(`<rect class="wait" data-name="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="url(#hatch)"><title>%s</title></rect>`,
			esc(wt.Name), c.xOf(wt.StartMs), c.y()+3, c.wOf(wt.DurationMs), barHeight-6,
			esc(fmt.Sprintf("wait %s @%d ms +%d ms", wt.Name, wt.StartMs, wt.DurationMs)))
	}
}

// splitLanes are berth's part of boot split into the waits outside it and
// its own work, each on its own lane.
func (c *chart) splitLanes() {
	s, r := &c.s, c.r
	waits := union(c.split.Waits, r.KernelToInitMs, r.EndMs)
	s.f(`<g id="split">` + "\n")
	c.label("waiting outside berth")
	for _, iv := range waits {
		s.f(`<rect class="waitlane" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`, c.xOf(iv[0]), c.y(), c.wOf(iv[1]-iv[0]), barHeight, fill[KindWait])
	}
	s.text(c.xOf(r.EndMs)+4, c.y()+barHeight-4, "d", fmt.Sprintf("%d ms", c.split.WaitMs))
	c.row++
	c.label("berth's own work")
	at := r.KernelToInitMs
	for _, iv := range append(waits, [2]int64{r.EndMs, r.EndMs}) {
		if iv[0] > at {
			s.f(`<rect class="ownlane" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`, c.xOf(at), c.y(), c.wOf(iv[0]-at), barHeight, fill[KindPhase])
		}
		at = max(at, iv[1])
	}
	s.text(c.xOf(r.EndMs)+4, c.y()+barHeight-4, "d", fmt.Sprintf("%d ms", c.split.BerthMs))
	c.row++
	s.f("</g>\n")
}

// milestones mark when each chain's target (kubelet's exec, the node's
// registration) came.
func (c *chart) milestones() {
	s := &c.s
	s.f(`<g id="milestones">`)
	for _, ch := range c.chains {
		if ch.Missing != "" || ch.AtMs <= 0 {
			continue
		}
		x := c.xOf(ch.AtMs)
		s.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c03030" stroke-dasharray="4 3"/>`, x, c.top, x, c.bottom)
		s.text(x+3, c.bottom+14, "milestone", fmt.Sprintf("%s @%d ms", ch.Target, ch.AtMs))
	}
	s.f("</g>\n</svg>\n")
}

// svgBuf collects the document; the first formatting error sticks.
type svgBuf struct {
	buf bytes.Buffer
	err error
}

func (s *svgBuf) f(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(&s.buf, format, args...)
	}
}

func (s *svgBuf) text(x float64, y int, class, text string) {
	s.f(`<text x="%.1f" y="%d" class="%s">%s</text>`, x, y, class, esc(text))
}

// esc escapes text for XML character data and attribute values, and
// replaces what XML cannot carry (control characters, invalid UTF-8) with
// U+FFFD, as encoding/xml's EscapeText does; by hand, because PID 1 links
// no encoding/xml for this one job.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&#34;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			b.WriteString("&#xD;")
		case xmlChar(r):
			b.WriteRune(r)
		default:
			b.WriteRune(utf8.RuneError)
		}
	}
	return b.String()
}

// xmlChar is XML 1.0's Char production.
func xmlChar(r rune) bool {
	return r >= 0x20 && r <= 0xD7FF && r != utf8.RuneError || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tickStep is a 1-2-5 step giving at most maxTicks ticks up to endMs.
func tickStep(endMs int64) int64 {
	for step := int64(100); ; step *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if endMs/(step*m) < maxTicks {
				return step * m
			}
		}
	}
}

func tickLabel(ms int64) string {
	if ms%1000 == 0 {
		return fmt.Sprintf("%d s", ms/1000)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

// union merges the waits (in start order) into disjoint intervals within
// [lo, hi].
func union(waits []report.Span, lo, hi int64) [][2]int64 {
	var out [][2]int64
	for _, w := range waits {
		s, e := max(w.StartMs, lo), min(w.StartMs+w.DurationMs, hi)
		if e <= s {
			continue
		}
		if n := len(out); n > 0 && s <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], e)
			continue
		}
		out = append(out, [2]int64{s, e})
	}
	return out
}
