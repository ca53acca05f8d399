package fate

import (
	"slices"
	"testing"
)

func TestRow(t *testing.T) {
	if got, want := Row("--use-max-pods", Honoured, "maxPods"), "| `--use-max-pods` | honoured | maxPods |"; got != want {
		t.Errorf("Row = %q, want %q", got, want)
	}
	for _, f := range []Fate{Honoured, Ignored, Refused} {
		if !f.Valid() {
			t.Errorf("%q not valid", f)
		}
	}
	if Fate("maybe").Valid() {
		t.Error(`"maybe" valid`)
	}
}

func TestREADMERows(t *testing.T) {
	readme := []byte("text\n| `--a` | honoured | x |\n| `settings.b` | refused | y |\n| `--c` | ignored, with a warning | z |\n")
	if got := READMERows(readme, "--"); !slices.Equal(got, []string{"| `--a` | honoured | x |", "| `--c` | ignored, with a warning | z |"}) {
		t.Errorf("rows %q", got)
	}
	if got := READMERows(readme, "settings."); len(got) != 1 {
		t.Errorf("rows %q", got)
	}
}
