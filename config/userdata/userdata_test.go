package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

type goldenDoc struct {
	Source      string `json:"source"`
	ContentType string `json:"contentType"`
	Skip        string `json:"skip,omitempty"`
	Mistyped    bool   `json:"mistypedNodeConfig,omitempty"`
	Data        string `json:"data,omitempty"`
}

// TestGolden decodes every testdata/golden/*.in and compares the documents
// with the matching .json. Regenerate with -update.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.in")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 15 {
		t.Fatalf("found %d inputs, want at least 15", len(ins))
	}
	for _, in := range ins {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".in"), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			out := []goldenDoc{}
			for _, d := range docs {
				if d.IsNodeConfig() == (d.Skip != "") {
					t.Errorf("IsNodeConfig disagrees with Skip for %s", d.Source)
				}
				out = append(out, goldenDoc{d.Source, d.ContentType, d.Skip, d.MistypedNodeConfig, string(d.Data)})
			}
			got, _ := json.MarshalIndent(out, "", "  ")
			got = append(got, '\n')
			want := strings.TrimSuffix(in, ".in") + ".json"
			golden.Check(t, want, got, *update)
		})
	}
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipBomb: a small gzip that expands past MaxDecodedSize is refused
// with an error naming the limit, without inflating it all.
func TestGzipBomb(t *testing.T) {
	bomb := gz(t, bytes.Repeat([]byte("a"), MaxDecodedSize+10))
	if len(bomb) > MaxUserDataSize {
		t.Fatalf("bomb is %d bytes, over the user-data limit it must fit in", len(bomb))
	}
	const want = "decoding user-data: decoded user data is over the 4194304-byte limit (userdata.MaxDecodedSize)"
	for name, data := range map[string][]byte{
		"gzip":        bomb,
		"base64 gzip": []byte(base64.StdEncoding.EncodeToString(bomb)),
	} {
		_, err := Decode(data)
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", name, err, want)
		}
	}
	// Just under the limit is fine.
	ok := gz(t, append([]byte("apiVersion: x\n#"), bytes.Repeat([]byte("a"), MaxDecodedSize-100)...))
	docs, err := Decode(ok)
	if err != nil || len(docs) != 1 || !docs[0].IsNodeConfig() {
		t.Errorf("large but allowed gzip: %v, %d docs", err, len(docs))
	}
	if _, err := DecodeNamed("big.yaml", make([]byte, MaxDecodedSize+1)); err == nil ||
		err.Error() != "decoding big.yaml: 4194305 bytes is over the 4194304-byte limit (userdata.MaxDecodedSize)" {
		t.Errorf("oversized file: %v", err)
	}
}

// TestNestedGzipBomb: 651 bytes of gzip inside gzip inside gzip that would
// inflate to 1 GiB stop at MaxDecodedSize, and decoding allocates a small
// multiple of the limit, not the gigabyte.
func TestNestedGzipBomb(t *testing.T) {
	bomb, err := os.ReadFile("testdata/bomb/zeros-1GiB.gz.gz.gz")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"gzip^3":        bomb,
		"base64 gzip^3": []byte(base64.StdEncoding.EncodeToString(bomb)),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(data)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.HasSuffix(err.Error(), "decoded user data is over the 4194304-byte limit (userdata.MaxDecodedSize)") {
			t.Errorf("%s: %v", name, err)
		}
		// bytes.Buffer doubles as it grows, so the largest layer may
		// cost twice the limit; 8x leaves room for the smaller layers.
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %v; %d bytes allocated", name, err, alloc)
		if alloc > 8*MaxDecodedSize {
			t.Errorf("%s: decoding allocated %d bytes, want at most %d", name, alloc, 8*MaxDecodedSize)
		}
	}
}

// TestUserDataSizeLimit: user data from IMDS is held to EC2's 16 KiB,
// counted before any decoding; files may be larger.
func TestUserDataSizeLimit(t *testing.T) {
	doc := []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n#")
	at := append(doc, bytes.Repeat([]byte("x"), MaxUserDataSize-len(doc))...)
	if docs, err := Decode(at); err != nil || len(docs) != 1 {
		t.Errorf("user data of exactly %d bytes: %v, %d docs", len(at), err, len(docs))
	}
	over := append(at, 'x')
	const want = "decoding user-data: 16385 bytes is over EC2's 16384-byte limit on raw user data (userdata.MaxUserDataSize)"
	if _, err := Decode(over); err == nil || err.Error() != want {
		t.Errorf("user data one byte over:\n got %v\nwant %s", err, want)
	}
	// The limit is on the raw bytes: base64 of 16 KiB is over it even
	// though it decodes to less.
	b64 := []byte(base64.StdEncoding.EncodeToString(at))
	if _, err := Decode(b64); err == nil || !strings.Contains(err.Error(), "over EC2's 16384-byte limit") {
		t.Errorf("base64 user data of %d bytes: %v", len(b64), err)
	}
	if docs, err := DecodeNamed("/etc/berth/config.d/10.yaml", over); err != nil || len(docs) != 1 {
		t.Errorf("a file over 16 KiB: %v, %d docs", err, len(docs))
	}
}

// TestBase64Limit: base64 that would decode past the budget is refused
// before its output is allocated.
func TestBase64Limit(t *testing.T) {
	d := &decoder{budget: 6}
	if _, _, err := d.base64("x", []byte("YWJjZGVmZ2g=")); err == nil || !strings.Contains(err.Error(), "over the 4194304-byte limit") {
		t.Errorf("base64 of 8 bytes with 6 left: %v", err)
	}
	d = &decoder{budget: 6}
	msg := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\nYWJjZGVmZ2g=\n--x--\n"
	if err := d.layer("x", "", []byte(msg), 0); err == nil || !strings.Contains(err.Error(), "over the 4194304-byte limit") {
		t.Errorf("Content-Transfer-Encoding base64 over the budget: %v", err)
	}
}

// TestDepthLimit: layers nested deeper than MaxDepth, and multipart nested
// deeper than MaxMultipartDepth, are refused.
func TestDepthLimit(t *testing.T) {
	data := []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")
	for range MaxDepth + 1 {
		data = gz(t, data)
	}
	if _, err := Decode(data); err == nil || err.Error() != "decoding user-data: more than 8 nested layers of gzip, base64 or multipart (userdata.MaxDepth)" {
		t.Errorf("deep gzip: %v", err)
	}
	// Nested multipart, each level one part.
	nested := func(levels int) []byte {
		msg := "Content-Type: application/node.eks.aws\n\nkind: NodeConfig\n"
		for i := range levels {
			b := fmt.Sprintf("b%d", i)
			msg = fmt.Sprintf("Content-Type: multipart/mixed; boundary=%s\n\n--%s\n%s\n--%s--\n", b, b, msg, b)
		}
		return []byte("MIME-Version: 1.0\n" + msg)
	}
	docs, err := Decode(nested(MaxMultipartDepth))
	if err != nil || len(docs) != 1 || docs[0].Source != "user-data part 1.1.1 (application/node.eks.aws)" {
		t.Errorf("multipart %d deep: %v %+v", MaxMultipartDepth, err, docs)
	}
	const want = "decoding user-data part 1.1.1: multipart nested more than 3 deep (userdata.MaxMultipartDepth)"
	if _, err := Decode(nested(MaxMultipartDepth + 1)); err == nil || err.Error() != want {
		t.Errorf("multipart %d deep:\n got %v\nwant %s", MaxMultipartDepth+1, err, want)
	}
	// Within the limit, wrapping is undone.
	data = []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")
	want3 := string(data)
	for range 3 {
		data = []byte(base64.StdEncoding.EncodeToString(gz(t, data)))
	}
	docs, err = Decode(data)
	if err != nil || len(docs) != 1 || string(docs[0].Data) != want3 {
		t.Errorf("3x base64(gzip): %v %+v", err, docs)
	}
}

func TestTooManyParts(t *testing.T) {
	parts := func(n int) []byte {
		var b strings.Builder
		b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n")
		for range n {
			b.WriteString("--x\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n")
		}
		b.WriteString("--x--\n")
		return []byte(b.String())
	}
	if docs, err := Decode(parts(MaxParts)); err != nil || len(docs) != MaxParts {
		t.Errorf("%d parts: %v, %d docs", MaxParts, err, len(docs))
	}
	if _, err := Decode(parts(MaxParts + 1)); err == nil || err.Error() != "decoding user-data: more than 32 MIME parts (userdata.MaxParts)" {
		t.Errorf("got %v", err)
	}
}

// TestLongMediaTypeShortened: a part's media type goes into its Source,
// so a long one is cut.
func TestLongMediaTypeShortened(t *testing.T) {
	mt := "application/" + strings.Repeat("x", 1000)
	in := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: " + mt + "\n\nhello\n--x--\n"
	docs, err := Decode([]byte(in))
	if err != nil || len(docs) != 1 {
		t.Fatalf("%v %+v", err, docs)
	}
	if want := "user-data part 1 (" + mt[:64] + "...)"; docs[0].Source != want {
		t.Errorf("Source %q, want %q", docs[0].Source, want)
	}
}

// TestMIMEErrors: malformed MIME fails with the part it is in.
func TestMIMEErrors(t *testing.T) {
	cases := map[string]string{
		"MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n--x\n\n--x--\n":                                                                                                      "decoding user-data: multipart Content-Type has no boundary",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: application/node.eks.aws\nContent-Transfer-Encoding: base64\n\n!!!notbase64\n--x--\n": "decoding user-data part 1 (application/node.eks.aws): Content-Transfer-Encoding base64: illegal base64 data at input byte 0",
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: application/node.eks.aws\nContent-Transfer-Encoding: uuencode\n\nx\n--x--\n":          `decoding user-data part 1 (application/node.eks.aws): unsupported Content-Transfer-Encoding "uuencode"`,
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: /\n\nx\n--x--\n":                                                                      `decoding user-data part 1: Content-Type "/": mime: no media type`,
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n":                                       "decoding user-data part 1: unexpected EOF (is the closing --x-- line missing?)",
		// The boundary parameter names none of the body's delimiters.
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--OTHER\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--OTHER--\n": `decoding user-data: no part begins with the Content-Type's boundary line --BOUNDARY (the body has "--OTHER", "--OTHER--": is the boundary parameter the one the parts use?)`,
		"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\nkind: NodeConfig\n":                                                                          "decoding user-data: no part begins with the Content-Type's boundary line --b (the body has no line starting with --)",
	}
	for in, want := range cases {
		_, err := Decode([]byte(in))
		if err == nil || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", in, err, want)
		}
	}
}

// TestNotMistakenForMIME: YAML whose first key is not a MIME header, and
// plain words that are valid base64, are left as they are.
func TestNotMistakenForMIME(t *testing.T) {
	for _, in := range []string{
		"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  containerd:\n    config: |\n      content-type: x\n",
		"abcd",
		"QUFBQQ==", // "AAAA": valid base64, not meaningful
	} {
		docs, err := Decode([]byte(in))
		if err != nil || len(docs) != 1 || string(docs[0].Data) != in || docs[0].Source != "user-data" {
			t.Errorf("%q: %v %+v", in, err, docs)
		}
	}
	docs, err := DecodeNamed("/etc/berth/config.d/10.yaml", []byte("#!/bin/sh\n"))
	if err != nil || len(docs) != 1 || docs[0].Source != "/etc/berth/config.d/10.yaml" || docs[0].Skip != "berth runs no scripts" || string(docs[0].Data) != "#!/bin/sh\n" || !docs[0].IsShellScript() {
		t.Errorf("named script, skipped with its text kept for config/al2: %v %+v", err, docs)
	}
}

// TestByteOrderMark: a UTF-8 BOM does not hide a MIME header.
func TestByteOrderMark(t *testing.T) {
	in := "\xef\xbb\xbfMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n--x--\n"
	docs, err := Decode([]byte(in))
	if err != nil || len(docs) != 1 || docs[0].Source != "user-data part 1 (text/x-shellscript)" {
		t.Errorf("BOM MIME: %v %+v", err, docs)
	}
}
