// Package fate names what berth does with one setting of another node
// OS's user data (Amazon Linux 2's bootstrap.sh options in config/al2,
// Bottlerocket's settings in config/bottlerocket): honoured, ignored with
// a warning, or refused; and the README's table rows that list each
// setting's fate, which those packages' tests hold to their tables.
package fate

import "strings"

// Fate is what becomes of a setting.
type Fate string

// The fates, worded as the README's tables word them.
const (
	Honoured Fate = "honoured"
	Ignored  Fate = "ignored, with a warning"
	Refused  Fate = "refused"
)

// Valid reports whether f is one of the fates.
func (f Fate) Valid() bool { return f == Honoured || f == Ignored || f == Refused }

// Row is the README's table row for a setting: | `key` | fate | why |.
func Row(key string, f Fate, why string) string {
	return "| `" + key + "` | " + string(f) + " | " + why + " |"
}

// READMERows are the lines of readme that are table rows of settings
// whose key starts with prefix ("--", "settings."), in order.
func READMERows(readme []byte, prefix string) []string {
	var rows []string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `"+prefix) {
			rows = append(rows, l)
		}
	}
	return rows
}
