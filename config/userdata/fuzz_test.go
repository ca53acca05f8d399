package userdata

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"mime/quotedprintable"
	"strings"
	"testing"
)

// checkBounds is what every fuzzer asserts of Decode's answer to input:
// over-long input is refused, and what comes back respects the limits.
func checkBounds(t *testing.T, input []byte, docs []Document, err error) {
	t.Helper()
	if len(input) > MaxUserDataSize && err == nil {
		t.Fatalf("%d bytes of user data decoded, over MaxUserDataSize", len(input))
	}
	if err != nil {
		if docs != nil {
			t.Errorf("documents returned with the error %v", err)
		}
		if err.Error() == "" || !strings.HasPrefix(err.Error(), "decoding user-data") {
			t.Errorf("error %q does not say where", err)
		}
		return
	}
	total := 0
	for _, d := range docs {
		total += len(d.Data)
		if len(d.Data) > MaxDecodedSize {
			t.Errorf("%s: %d bytes, over MaxDecodedSize", d.Source, len(d.Data))
		}
		if d.Skip != "" && d.Data != nil && !d.IsShellScript() && !d.IsCloudConfig() {
			t.Errorf("skipped %s carries data and is no shell script or cloud-config", d.Source)
		}
		if d.Skip == "" && d.IsShellScript() {
			t.Errorf("%s is a shell script taken for a NodeConfig", d.Source)
		}
		if d.Source == "" || d.ContentType == "" {
			t.Errorf("document without source or type: %+v", d)
		}
		if len(d.Source) > 200 {
			t.Errorf("source name of %d bytes: %.80q...", len(d.Source), d.Source)
		}
	}
	if len(docs) > MaxParts {
		t.Errorf("%d documents, over MaxParts", len(docs))
	}
	// Decoded bytes are charged to one budget; only a plain document
	// (the input itself) is not decoded.
	if total > MaxDecodedSize+len(input) {
		t.Errorf("%d bytes decoded from %d", total, len(input))
	}
}

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and what
// it returns must respect the limits.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--//--\n"))
	f.Add([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"))
	f.Add([]byte("H4sIAAAAAAAA/0rOzytJzSvRBQQAAP//"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Decode(data)
		checkBounds(t, data, docs, err)
	})
}

// FuzzDecodeGzip fuzzes what is inside a gzip layer, which FuzzDecode's
// mutations rarely get through intact: gzip inside gzip, MIME inside gzip,
// garbage that happens to start with the gzip magic. Stored (uncompressed)
// blocks unless compress is set: a compressing writer costs more than the
// decoding under test.
func FuzzDecodeGzip(f *testing.F) {
	f.Add([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"), true)
	f.Add([]byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--x--\n"), false)
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, false)
	f.Fuzz(func(t *testing.T, inner []byte, compress bool) {
		level := gzip.NoCompression
		if compress {
			level = gzip.BestSpeed
		}
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, level)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(inner)
		zw.Close()
		docs, err := Decode(buf.Bytes())
		checkBounds(t, buf.Bytes(), docs, err)
	})
}

// FuzzDecodeBase64 fuzzes what is inside a base64 layer.
func FuzzDecodeBase64(f *testing.F) {
	f.Add([]byte("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"), false)
	f.Add([]byte("{\"kind\":\"NodeConfig\"}"), true)
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00, 0x00}, false)
	f.Fuzz(func(t *testing.T, inner []byte, wrap bool) {
		enc := base64.StdEncoding.EncodeToString(inner)
		if wrap {
			// As base64(1) writes it: 76-column lines.
			var b strings.Builder
			for len(enc) > 76 {
				b.WriteString(enc[:76] + "\n")
				enc = enc[76:]
			}
			b.WriteString(enc)
			enc = b.String()
		}
		docs, err := Decode([]byte(enc))
		checkBounds(t, []byte(enc), docs, err)
	})
}

// FuzzDecodeMIME fuzzes a MIME part's headers and body inside a
// well-formed multipart message, and its Content-Transfer-Encoding layer.
func FuzzDecodeMIME(f *testing.F) {
	f.Add("application/node.eks.aws", "base64", []byte("kind: NodeConfig\n"))
	f.Add("application/node.eks.aws", "quoted-printable", []byte("kind: NodeConfig\n"))
	f.Add("multipart/mixed; boundary=y", "7bit", []byte("--y\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--y--\n"))
	f.Add("text/x-shellscript", "", []byte("#!/bin/sh\n"))
	f.Fuzz(func(t *testing.T, contentType, cte string, body []byte) {
		if strings.ContainsAny(contentType+cte, "\r\n") {
			return // a header line; the headers are FuzzDecode's job
		}
		var enc []byte
		switch strings.ToLower(cte) {
		case "base64":
			enc = []byte(base64.StdEncoding.EncodeToString(body))
		case "quoted-printable":
			var b bytes.Buffer
			qw := quotedprintable.NewWriter(&b)
			qw.Write(body)
			qw.Close()
			enc = b.Bytes()
		default:
			enc = body
		}
		msg := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"==BOUNDARY==\"\n\n--==BOUNDARY==\nContent-Type: " +
			contentType + "\nContent-Transfer-Encoding: " + cte + "\n\n" + string(enc) + "\n--==BOUNDARY==--\n"
		docs, err := Decode([]byte(msg))
		checkBounds(t, []byte(msg), docs, err)
	})
}
