package nodeconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseRegistryMirrors(t *testing.T) {
	got, err := ParseRegistryMirrors(`{"registry.berth.test": ["http://10.0.2.2:5000"],
		"docker.io": ["https://mirror.example.com", "https://m2.example.com:8443/cache/v2"],
		"*": ["http://[fd00::1]:5000"], "10.1.2.3:5000": ["https://m.example.com"]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []RegistryMirrors{
		{Registry: "*", Endpoints: []string{"http://[fd00::1]:5000"}},
		{Registry: "10.1.2.3:5000", Endpoints: []string{"https://m.example.com"}},
		{Registry: "docker.io", Endpoints: []string{"https://mirror.example.com", "https://m2.example.com:8443/cache/v2"}},
		{Registry: "registry.berth.test", Endpoints: []string{"http://10.0.2.2:5000"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got, err := ParseRegistryMirrors(" {} "); err != nil || len(got) != 0 {
		t.Errorf("empty object: %v %v", got, err)
	}
}

func TestParseRegistryMirrorsErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`["http://x"]`, `want a JSON object of registry host to a list of mirror URLs, as {"docker.io": ["https://mirror.example.com"]}; got ["http://x"]`},
		{``, `want a JSON object`},
		{`{"a": ["http://x"]} {}`, `more than one JSON value`},
		{`{"a": ["http://x"]`, `reading the JSON object: EOF`},
		{`{"a": ["http://x"], "a": ["http://y"]}`, `["a"]: registry listed twice`},
		{`{"a": []}`, `["a"]: no mirrors: list at least one, or leave the registry out`},
		{`{"a": null}`, `["a"]: want a list of mirror URLs, got null`},
		{`{"a": "http://x"}`, `["a"]: want a list of mirror URLs, got "http://x"`},
		{`{"a": ["http://x", "http://x"]}`, `["a"][1]: "http://x" listed twice`},
		{`{"a": [null]}`, `["a"][0]: want a URL string, got null`},
		{`{"_default": ["http://x"]}`, `["_default"]: not a registry host`},
		{`{"a/b": ["http://x"]}`, `["a/b"]: not a registry host`},
		{`{"..": ["http://x"]}`, `[".."]: not a registry host`},
		{`{"a.": ["http://x"]}`, `["a."]: not a registry host (host or host:port, as image references name it, or "*" for every registry): "a.": a trailing dot is not allowed`},
		{`{"a:0": ["http://x"]}`, `port "0" is not a number from 1 to 65535`},
		{`{"a:65536": ["http://x"]}`, `port "65536"`},
		{`{"a:080": ["http://x"]}`, `port "080"`},
		{`{"[1.2.3.4]:5": ["http://x"]}`, `"[1.2.3.4]" is not a bracketed IPv6 address`},
		{`{"[fe80::1%eth0]": ["http://x"]}`, `not a bracketed IPv6 address`},
		{`{"a": ["HTTP://x"]}`, `"HTTP://x" is not a mirror URL: want an http:// or https:// URL`},
		{`{"a": ["x.example.com"]}`, `want an http:// or https:// URL`},
		{`{"a": ["http:x"]}`, `"http:x" is not a mirror URL: want an http:// or https:// URL`},
		{`{"a": ["http:///v2"]}`, `no host`},
		{`{"a": ["https://u:p@x"]}`, `credentials do not belong in it`},
		{`{"a": ["https://x/?a=b"]}`, `a query or fragment is not allowed`},
		{`{"a": ["https://x/?"]}`, `a query or fragment is not allowed`},
		{`{"a": ["https://x/#"]}`, `a query or fragment is not allowed`},
		{`{"a": ["https://x/\"]"]}`, `'"' at byte 10 is not allowed in a URL`},
		{`{"a": ["https://x/\n"]}`, `'\n' at byte 10`},
		{`{"a": ["https://x y"]}`, `' ' at byte 9`},
		{`{"a": ["https://x:99999"]}`, `port "99999"`},
		{`{"a": ["https://x_y"]}`, `is not a DNS name`},
	} {
		_, err := ParseRegistryMirrors(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRegistryMirrors(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestParseRegistryMirrorsKeepsGood: one bad registry does not hide the
// others' problems, and the good ones come back.
func TestParseRegistryMirrorsKeepsGood(t *testing.T) {
	got, err := ParseRegistryMirrors(`{"b": ["ftp://x"], "a": ["http://x"], "c d": ["http://y"]}`)
	if len(flatten(err)) != 2 {
		t.Errorf("want two problems, got %v", err)
	}
	if len(got) != 1 || got[0].Registry != "a" {
		t.Errorf("good registries: %+v", got)
	}
}

func TestRegistryMirrorsOf(t *testing.T) {
	doc := validDoc(t, "metadata:\n  annotations:\n    berth.dev/registry-mirrors: '{\"docker.io\": [\"https://m\", 1]}'\n")
	cfg, _, err := Parse("src", doc)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := RegistryMirrorsOf(cfg)
	want := `metadata.annotations["berth.dev/registry-mirrors"]["docker.io"][1]: want a URL string, got 1`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if len(ms) != 0 {
		t.Errorf("a registry with a bad entry is left out, got %+v", ms)
	}
	cfg.Metadata = nil
	if ms, err := RegistryMirrorsOf(cfg); ms != nil || err != nil {
		t.Errorf("no annotation: %v %v", ms, err)
	}
}

// FuzzParseRegistryMirrors: no panic; what is accepted passes the checks
// the renderer relies on (registry and URLs in RFC 3986's characters, no
// quote, backslash or line break) and parses again to the same result from
// its own JSON.
func FuzzParseRegistryMirrors(f *testing.F) {
	f.Add(`{"registry.berth.test": ["http://10.0.2.2:5000"], "*": ["https://m.example.com/p"]}`)
	f.Add(`{"[::1]:5000": ["http://[::1]:5001"], "a": ["https://x", "https://y"]}`)
	f.Add(`{"a": ["http://x"], "a": []}`)
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := ParseRegistryMirrors(in)
		if err != nil {
			return
		}
		obj := map[string][]string{}
		for _, m := range ms {
			if err := registryKey(m.Registry); err != nil {
				t.Fatalf("accepted registry %q: %v", m.Registry, err)
			}
			if strings.ContainsAny(m.Registry, "/\\\"\n") || m.Registry == "." || m.Registry == ".." {
				t.Fatalf("accepted registry %q cannot be a directory name", m.Registry)
			}
			for _, e := range m.Endpoints {
				if strings.ContainsAny(e, "\\\"\n\r ") {
					t.Fatalf("accepted URL %q needs escaping", e)
				}
			}
			obj[m.Registry] = m.Endpoints
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRegistryMirrors(string(b))
		if err != nil || !reflect.DeepEqual(again, ms) {
			t.Fatalf("re-parse of %s: %+v, %v; want %+v", b, again, err, ms)
		}
	})
}
