package repo

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseVersion(t *testing.T) {
	for _, s := range []string{"0", "1", "v1.4.0", "2026.12.1", "1.2.3.4.5.6.7.8", "999999999.0"} {
		v, err := ParseVersion(s)
		if err != nil {
			t.Errorf("ParseVersion(%q): %v", s, err)
		} else if v.String() != s {
			t.Errorf("ParseVersion(%q).String() = %q", s, v.String())
		}
	}
	for s, why := range map[string]string{
		"":                  "empty",
		"v":                 "empty",
		"dev":               `has 'd'`,
		"1.":                "number 2 is empty",
		".1":                "number 1 is empty",
		"1..2":              "number 2 is empty",
		"01.2":              "leading zero",
		"1.2.3-rc1":         `has '-'`,
		"v0.3.1-4-gabc123":  `has '-'`,
		"1.2.3.4.5.6.7.8.9": "more than 8 numbers",
		"1234567890":        "more than 9 digits",
		"+1":                `has '+'`,
		" 1":                `has ' '`,
		"V1":                `has 'V'`,
	} {
		_, err := ParseVersion(s)
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseVersion(%q) = %v, want %v about %q", s, err, ErrVersion, why)
		}
	}
}

func TestVersionCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.2", "1.2.0", 0},
		{"v1.2", "1.2", 0},
		{"1.10", "1.9", 1},
		{"1.9.9", "1.10", -1},
		{"2", "1.999999999", 1},
		{"0", "0.0.0.1", -1},
		{"2026.12.1", "2026.2.30", 1},
	} {
		a, err := ParseVersion(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseVersion(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Compare(b); got != tc.want {
			t.Errorf("%s vs %s = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := b.Compare(a); got != -tc.want {
			t.Errorf("%s vs %s = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// FuzzParseVersion: a version from a repository or the running system is
// outside input. Whatever parses must round-trip, be made of digits and
// dots, and compare consistently.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "v1.10", "0", "01", "1..2", "v", "1.2.3-rc1", "999999999.999999999", "1.2.3.4.5.6.7.8.9", "\xff"} {
		f.Add(s, "1.2.0")
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		v, err := ParseVersion(s)
		if err != nil {
			if !errors.Is(err, ErrVersion) {
				t.Fatalf("ParseVersion(%q) error %v does not wrap ErrVersion", s, err)
			}
			return
		}
		if v.String() != s || !utf8.ValidString(s) {
			t.Fatalf("ParseVersion(%q) = %q", s, v.String())
		}
		if strings.Trim(strings.TrimPrefix(s, "v"), "0123456789.") != "" {
			t.Fatalf("ParseVersion accepted %q", s)
		}
		if v.Compare(v) != 0 {
			t.Fatalf("%q is not equal to itself", s)
		}
		w, err := ParseVersion(other)
		if err != nil {
			return
		}
		if v.Compare(w) != -w.Compare(v) {
			t.Fatalf("%q vs %q = %d, reverse = %d", s, other, v.Compare(w), w.Compare(v))
		}
	})
}

func TestParseCustom(t *testing.T) {
	good := `{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA + `","kind":"root","later":"ignored"}`
	c, err := ParseCustom([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c != (Custom{Version: "1.2.0", Arch: "amd64", RootHash: hashA, Kind: KindRoot}) {
		t.Errorf("ParseCustom = %+v", c)
	}
	for in, why := range map[string]string{
		``:     "no custom metadata",
		`null`: "version",
		`[]`:   "cannot unmarshal",
		`{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA + `"}`:                               "kind",
		`{"version":"1.2.0","arch":"AMD64","rootHash":"` + hashA + `","kind":"uki"}`:                  "arch",
		`{"version":"1.2.0","arch":"amd64","rootHash":"` + strings.ToUpper(hashA) + `","kind":"uki"}`: "upper-case",
		`{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA[:62] + `","kind":"uki"}`:             "64 or 128",
		`{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA[:63] + `x","kind":"uki"}`:            "invalid byte",
		`{"version":"1.2.0-dirty","arch":"amd64","rootHash":"` + hashA + `","kind":"uki"}`:            "version",
		`{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA + `","kind":"initrd"}`:               "kind",
		`{"version":"1.2.0","arch":"amd64/../x","rootHash":"` + hashA + `","kind":"uki"}`:             "arch",
		`{"version":1,"arch":"amd64","rootHash":"` + hashA + `","kind":"uki"}`:                        "cannot unmarshal",
	} {
		_, err := ParseCustom([]byte(in))
		if !errors.Is(err, ErrMetadata) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseCustom(%s) = %v, want %v about %q", in, err, ErrMetadata, why)
		}
	}
}

// FuzzParseCustom: custom metadata comes from the repository. What parses
// must name a path-safe target and survive a round trip.
func FuzzParseCustom(f *testing.F) {
	f.Add([]byte(`{"version":"1.2.0","arch":"amd64","rootHash":"` + hashA + `","kind":"root"}`))
	f.Add([]byte(`{"version":"v2","arch":"arm64","rootHash":"` + hashA + hashB + `","kind":"uki","x":[1,{}]}`))
	f.Add([]byte(`{"version":"1","arch":"a","rootHash":"","kind":"uki"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"kind":"uki","kind":"root"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCustom(data)
		if err != nil {
			if !errors.Is(err, ErrMetadata) {
				t.Fatalf("error %v does not wrap ErrMetadata", err)
			}
			return
		}
		p := targetPath(c.Arch, c.Version, c.Kind)
		if strings.Contains(p, "..") || strings.Count(p, "/") != 2 {
			t.Fatalf("custom metadata %s gives target path %q", data, p)
		}
		again, err := ParseCustom(mustJSON(t, c))
		if err != nil || again != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}
