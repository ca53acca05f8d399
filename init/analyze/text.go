package analyze

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-node/berth/init/report"
	"github.com/berth-node/berth/update/status"
)

// WriteText writes the summary, the blame list, the critical chains and
// the waits outside berth.
func WriteText(w io.Writer, b *Boot) error {
	r := b.Report
	var sb strings.Builder
	status := "ok"
	if !r.OK {
		status = "FAILED: " + r.Error
	}
	fmt.Fprintf(&sb, "berth %s, boot %s: %s\n", r.Version, orDash(r.BootID), status)
	sp := Split(b)
	fmt.Fprintf(&sb, "kernel → berth %d ms; berth's part %d ms: its own work %d ms, waits outside it %d ms\n",
		r.KernelToInitMs, r.EndMs-r.KernelToInitMs, sp.BerthMs, sp.WaitMs)
	if c := r.CPU; c != nil {
		fmt.Fprintf(&sb, "CPU to the report: berth %d ms (user %d, sys %d); reaped children %d ms (user %d, sys %d)\n",
			c.UserMs+c.SysMs, c.UserMs, c.SysMs, c.ChildrenUserMs+c.ChildrenSysMs, c.ChildrenUserMs, c.ChildrenSysMs)
	}
	if r.RSSKiB > 0 {
		fmt.Fprintf(&sb, "RSS at the report: %d KiB\n", r.RSSKiB)
	}
	if l := bootChain(r); l != "" {
		sb.WriteString(l + "\n")
	}
	if l := updateLine(r.Update); l != "" {
		sb.WriteString(l + "\n")
	}

	sb.WriteString("\nBlame, slowest first:\n")
	for _, x := range Blame(b) {
		fmt.Fprintln(&sb, strings.TrimRight(fmt.Sprintf("%8d ms  %-34s%s", x.DurationMs, x.label(), note(x)), " "))
	}

	var tw *tabwriter.Writer
	for _, c := range Chains(b) {
		if c.Missing != "" {
			fmt.Fprintf(&sb, "\nCritical chain to %s: not reached: %s\n", c.Target, c.Missing)
			continue
		}
		fmt.Fprintf(&sb, "\nCritical chain to %s @%d ms (each step @start +duration):\n", c.Target, c.AtMs)
		tw = tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
		for _, l := range c.Links {
			gap := ""
			if l.GapMs > chainSlackMs {
				gap = fmt.Sprintf("(then %d ms untimed)", l.GapMs)
			}
			fmt.Fprintf(tw, "  %s\t@%d ms\t+%d ms\t%s\n", l.label(), l.StartMs, l.DurationMs, gap)
		}
		tw.Flush()
	}

	sb.WriteString("\nWaits outside berth (~: start placed from the order of the steps):\n")
	if len(sp.Waits) == 0 {
		sb.WriteString("  none recorded\n")
	}
	tw = tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	for _, s := range sp.Waits {
		mark := " "
		if s.Derived {
			mark = "~"
		}
		fmt.Fprintf(tw, "  %s\t%s@%d ms\t+%d ms\tin %s\n", s.Name, mark, s.StartMs, s.DurationMs, s.Phase)
	}
	tw.Flush()
	// tabwriter pads empty last columns; keep the lines clean for diffs.
	lines := strings.Split(sb.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// bootChain says what booted the kernel and from which root slot: the
// report's firmware section and, on a disk boot, root.verity.slot; empty
// on a boot without UEFI.
func bootChain(r *report.Report) string {
	f := r.Firmware
	if f == nil {
		return ""
	}
	sb := "UEFI, Secure Boot "
	switch {
	case f.SecureBoot:
		sb += "on"
	case f.SetupMode:
		sb += "off (setup mode: no keys enrolled)"
	default:
		sb += "off"
	}
	if f.Loader != "" {
		sb += "; " + f.Loader
		if f.Entry != "" {
			sb += " started " + f.Entry
		}
	}
	if root, ok := r.Root.(map[string]any); ok {
		if v, ok := root["verity"].(map[string]any); ok {
			if slot, ok := v["slot"].(string); ok && slot != "" {
				sb += "; root slot " + slot
				switch by, _ := v["slotBy"].(string); by {
				case "hash":
					sb += " (found by its root hash)"
				case "hint":
					sb += " (named by berth.slot=, root hash checked)"
				}
			}
		}
	}
	if f.Error != "" {
		sb += "; unreadable: " + oneLine(f.Error)
	}
	return "boot: " + sb
}

// updateLine says which image version runs from which root slot, and
// where the boot stands in an update: the report's update section; empty
// for a report from before it.
func updateLine(u *status.Status) string {
	if u == nil {
		return ""
	}
	l := "version: " + orDash(u.Version) + ", slot " + orDash(u.Slot)
	switch {
	case u.Entry != "" && u.Trial:
		l += fmt.Sprintf("; entry %s (trial: %d tries left, %d done)", u.Entry, u.TriesLeft, u.TriesDone)
	case u.Entry != "":
		l += "; entry " + u.Entry + " (" + u.State + ")"
	case u.Boot == status.BootDirect:
		l += "; direct kernel boot, no boot counting"
	case u.Boot == status.BootUEFI:
		l += "; not started by systemd-boot, no boot counting"
	}
	if lu := u.LastUpdate; lu != nil {
		l += fmt.Sprintf("; last update %s → %s: %s", orDash(lu.From), orDash(lu.To), lu.Result)
		if lu.Reason != "" {
			l += " (" + oneLine(lu.Reason) + ")"
		}
		if !lu.At.IsZero() {
			l += " at " + lu.At.UTC().Format(time.RFC3339)
		}
	}
	if u.Error != "" {
		l += "; " + oneLine(u.Error)
	}
	return l
}

func note(b Bar) string {
	if b.Note == "" {
		return ""
	}
	return "  " + oneLine(b.Note)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
