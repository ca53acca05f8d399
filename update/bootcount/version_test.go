package bootcount

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

func sign(n int) int { return cmpInt(n, 0) }

// TestVersionCompareSystemd runs the cases of systemd 252's own tests
// (testdata/strverscmp_improved.tsv names them), both ways round.
func TestVersionCompareSystemd(t *testing.T) {
	f, err := os.Open("testdata/strverscmp_improved.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Split(line, "\t")
		if len(fs) != 3 {
			t.Fatalf("testdata line %q: want 3 tab-separated fields", line)
		}
		for i := range 2 {
			if fs[i] == "<null>" {
				fs[i] = "" // strempty()
			}
		}
		want, err := strconv.Atoi(fs[2])
		if err != nil {
			t.Fatalf("testdata line %q: %v", line, err)
		}
		if got := VersionCompare(fs[0], fs[1]); got != want {
			t.Errorf("VersionCompare(%q, %q) = %d, want %d", fs[0], fs[1], got, want)
		}
		if got := VersionCompare(fs[1], fs[0]); got != -want {
			t.Errorf("VersionCompare(%q, %q) = %d, want %d", fs[1], fs[0], got, -want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 140 {
		t.Fatalf("read %d cases from testdata, want the 147 systemd has", n)
	}
}

// TestVersionCompareOrder is systemd's versions[] list of
// TEST(strverscmp_improved): each is older than every later one.
func TestVersionCompareOrder(t *testing.T) {
	versions := []string{"~1", "", "ab", "abb", "abc", "0001", "002", "12", "122", "122.9",
		"123~rc1", "123", "123-a", "123-a.1", "123-a1", "123-a1.1", "123-3", "123-3.1",
		"123^patch1", "123^1", "123.a-1", "123.1-1", "123a-1", "124"}
	for i, older := range versions {
		if got := VersionCompare(older, older); got != 0 {
			t.Errorf("VersionCompare(%q, itself) = %d", older, got)
		}
		for _, newer := range versions[i+1:] {
			if got := VersionCompare(older, newer); got != -1 {
				t.Errorf("VersionCompare(%q, %q) = %d, want -1", older, newer, got)
			}
			if got := VersionCompare(newer, older); got != 1 {
				t.Errorf("VersionCompare(%q, %q) = %d, want 1", newer, older, got)
			}
		}
	}
}

// FuzzVersionCompare checks what any order must satisfy: antisymmetry
// and a result in {-1, 0, 1}, with no panic on any bytes.
func FuzzVersionCompare(f *testing.F) {
	for _, s := range [][2]string{{"1.0", "1.0~rc1"}, {"123^1", "123-1"}, {"", "~"}, {"10.0001", "10.1"}, {"1.1.α", "1.1.ββ"}, {"1-", "1."}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := VersionCompare(a, b), VersionCompare(b, a)
		if ab != sign(ab) || ab != -ba {
			t.Fatalf("VersionCompare(%q, %q) = %d, reversed %d", a, b, ab, ba)
		}
		if VersionCompare(a, a) != 0 {
			t.Fatalf("VersionCompare(%q, itself) != 0", a)
		}
	})
}
