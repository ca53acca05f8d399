package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-node/berth/rollout/api/v1alpha1"
)

// Window is a maintenance window: a daily time range in UTC on some days
// of the week.
type Window struct {
	// Days holds the weekdays the window opens on; all false is every day.
	Days [7]bool
	// Start and End are minutes after midnight UTC; End < Start crosses
	// midnight.
	Start, End int
}

var dayNames = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}

// ParseWindow checks a MaintenanceWindow from the spec: the days "Mon"
// ... "Sun" (any case), the times "HH:MM".
func ParseWindow(w v1alpha1.MaintenanceWindow) (Window, error) {
	var out Window
	for _, d := range w.Days {
		i := -1
		for j, n := range dayNames {
			if strings.EqualFold(strings.TrimSpace(d), n) {
				i = j
			}
		}
		if i < 0 {
			return Window{}, fmt.Errorf("days: %q: want one of %s", d, strings.Join(dayNames[:], ", "))
		}
		out.Days[i] = true
	}
	var err error
	if out.Start, err = ParseClock(w.Start); err != nil {
		return Window{}, fmt.Errorf("start: %w", err)
	}
	if out.End, err = ParseClock(w.End); err != nil {
		return Window{}, fmt.Errorf("end: %w", err)
	}
	if out.Start == out.End {
		return Window{}, fmt.Errorf("start and end are both %s: the window would be empty or the whole day; leave maintenanceWindow out for always", w.Start)
	}
	return out, nil
}

// ParseClock reads "HH:MM" (24-hour, two digits each) as minutes after
// midnight.
func ParseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' {
		return 0, fmt.Errorf("%q: want HH:MM, UTC", s)
	}
	n := 0
	for i, c := range []byte(s) {
		if i == 2 {
			continue
		}
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q: want HH:MM, UTC", s)
		}
		n = n*10 + int(c-'0')
	}
	h, m := n/100, n%100
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("%q: want 00:00 to 23:59", s)
	}
	return h*60 + m, nil
}

// FormatClock is ParseClock's inverse.
func FormatClock(min int) string { return fmt.Sprintf("%02d:%02d", min/60, min%60) }

// Open says whether the window is open at t.
func (w Window) Open(t time.Time) bool {
	t = t.UTC()
	m := t.Hour()*60 + t.Minute()
	on := func(d time.Weekday) bool { return w.Days == [7]bool{} || w.Days[d] }
	if w.Start < w.End {
		return on(t.Weekday()) && m >= w.Start && m < w.End
	}
	// Across midnight: the evening part is today's window, the morning
	// part yesterday's.
	return on(t.Weekday()) && m >= w.Start || on((t.Weekday()+6)%7) && m < w.End
}

// String describes the window for a condition's message.
func (w Window) String() string {
	var days []string
	for i, on := range w.Days {
		if on {
			days = append(days, dayNames[i])
		}
	}
	when := "every day"
	if len(days) > 0 {
		when = strings.Join(days, ",")
	}
	return fmt.Sprintf("%s %s-%s UTC", when, FormatClock(w.Start), FormatClock(w.End))
}
