package publish

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/image/secureboot"
)

// An AMI must be able to boot the disk it is made of: with uefi-data,
// EC2 starts it with Secure Boot on and those keys, so the disk must be
// signed by a certificate in their db.
func TestCheckKeys(t *testing.T) {
	k, err := secureboot.LoadKeys(context.Background(), slog.New(slog.DiscardHandler), filepath.Join("..", "secureboot", "testdata", "testkeys"))
	if err != nil {
		t.Fatal(err)
	}
	uefi := strings.TrimSpace(string(k.File(secureboot.FileUEFIData)))
	other, err := secureboot.Generate(secureboot.GenerateOptions{CommonNamePrefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	signed := Image{DiskPath: "build/image/disk.raw", SignerCertSHA256: k.DB.Fingerprint()}
	for name, c := range map[string]struct {
		img  Image
		uefi string
		want string // "" for no error
	}{
		"signed, its keys":            {signed, uefi, ""},
		"signed, no keys":             {signed, "", ""},
		"unsigned, no keys":           {Image{DiskPath: "d"}, "", ""},
		"unsigned, keys":              {Image{DiskPath: "d"}, uefi, "d is unsigned"},
		"signed by another key":       {Image{DiskPath: "d", SignerCertSHA256: other.DB.Fingerprint()}, uefi, "not " + other.DB.Fingerprint()},
		"signed, other key set's db":  {signed, strings.TrimSpace(string(other.File(secureboot.FileUEFIData))), "would refuse to boot"},
		"signed, uefi-data not valid": {signed, "QU1aTlVFRkk=", "reading the uefi-data"},
	} {
		err := CheckKeys(c.img, c.uefi)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}
