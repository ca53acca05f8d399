package userdata

import "testing"

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, and what
// it returns must respect the limits.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--//--\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Decode(data)
		if err != nil {
			return
		}
		total := 0
		for _, d := range docs {
			total += len(d.Data)
			if d.Skip != "" && d.Data != nil {
				t.Errorf("skipped %s carries data", d.Source)
			}
			if d.Source == "" || d.ContentType == "" {
				t.Errorf("document without source or type: %+v", d)
			}
		}
		if len(docs) > MaxParts+1 {
			t.Errorf("%d documents, over MaxParts", len(docs))
		}
		if total > MaxDecodedSize+len(data) {
			t.Errorf("%d bytes decoded from %d", total, len(data))
		}
	})
}
