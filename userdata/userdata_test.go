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
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

type goldenDoc struct {
	Source      string `json:"source"`
	ContentType string `json:"contentType"`
	Skip        string `json:"skip,omitempty"`
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
				out = append(out, goldenDoc{d.Source, d.ContentType, d.Skip, string(d.Data)})
			}
			got, _ := json.MarshalIndent(out, "", "  ")
			got = append(got, '\n')
			want := strings.TrimSuffix(in, ".in") + ".json"
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wb, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (go test -update creates it)", err)
			}
			if !bytes.Equal(got, wb) {
				t.Errorf("documents differ from %s:\n%s", want, got)
			}
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
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	for name, data := range map[string][]byte{
		"gzip":        bomb,
		"base64 gzip": []byte(base64.StdEncoding.EncodeToString(bomb)),
	} {
		_, err := Decode(data)
		if err == nil || err.Error() != "decoding user-data: decoded user data is over the 16777216-byte limit" {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Just under the limit is fine.
	ok := gz(t, append([]byte("apiVersion: x\n#"), bytes.Repeat([]byte("a"), MaxDecodedSize-100)...))
	docs, err := Decode(ok)
	if err != nil || len(docs) != 1 || !docs[0].IsNodeConfig() {
		t.Errorf("large but allowed gzip: %v, %d docs", err, len(docs))
	}
	if _, err := Decode(make([]byte, MaxDecodedSize+1)); err == nil || !strings.Contains(err.Error(), "over the 16777216-byte limit") {
		t.Errorf("oversized raw input: %v", err)
	}
}

// TestDepthLimit: layers nested deeper than MaxDepth are refused.
func TestDepthLimit(t *testing.T) {
	data := []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")
	for range MaxDepth + 1 {
		data = gz(t, data)
	}
	if _, err := Decode(data); err == nil || err.Error() != "decoding user-data: more than 8 nested layers of gzip, base64 or multipart" {
		t.Errorf("deep gzip: %v", err)
	}
	// Nested multipart, each level one part.
	msg := "Content-Type: application/node.eks.aws\n\nkind: NodeConfig\n"
	for i := range MaxDepth + 1 {
		b := fmt.Sprintf("b%d", i)
		msg = fmt.Sprintf("Content-Type: multipart/mixed; boundary=%s\n\n--%s\n%s\n--%s--\n", b, b, msg, b)
	}
	if _, err := Decode([]byte("MIME-Version: 1.0\n" + msg)); err == nil || !strings.Contains(err.Error(), "more than 8 nested layers") {
		t.Errorf("deep multipart: %v", err)
	}
	// Within the limit, wrapping is undone.
	data = []byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n")
	want := string(data)
	for range 3 {
		data = []byte(base64.StdEncoding.EncodeToString(gz(t, data)))
	}
	docs, err := Decode(data)
	if err != nil || len(docs) != 1 || string(docs[0].Data) != want {
		t.Errorf("3x base64(gzip): %v %+v", err, docs)
	}
}

func TestTooManyParts(t *testing.T) {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n")
	for range MaxParts + 1 {
		b.WriteString("--x\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n")
	}
	b.WriteString("--x--\n")
	if _, err := Decode([]byte(b.String())); err == nil || err.Error() != "decoding user-data: more than 256 MIME parts" {
		t.Errorf("got %v", err)
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
	if err != nil || len(docs) != 1 || docs[0].Source != "/etc/berth/config.d/10.yaml" || docs[0].Skip != "berth runs no scripts" || docs[0].Data != nil {
		t.Errorf("named script: %v %+v", err, docs)
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
