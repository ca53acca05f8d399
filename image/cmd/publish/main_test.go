package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/manifest"
	"github.com/berth-node/berth/qemu-tests/awsstub/ebs"
	"github.com/berth-node/berth/qemu-tests/awsstub/ec2"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// disk writes a 3 MiB disk with 1 MiB of data then a hole, and its manifest.
func disk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data := bytes.Repeat([]byte("berth"), 1<<20/5+1)[:1<<20]
	f, err := os.Create(filepath.Join(dir, "disk.raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 20); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(data, make([]byte, 2<<20)...))
	mj, _ := json.Marshal(manifest.Manifest{BerthVersion: "v2.0.0", Arch: "amd64", Disk: &manifest.Disk{Path: "disk.raw", Size: 3 << 20, SHA256: hex.EncodeToString(sum[:])}})
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDryRun(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-image", disk(t), "-dry-run", "-uefi-data", ""}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "plan: 1 GiB snapshot, 6 blocks of 512 KiB: 2 to send (1.0 MiB), 4 skipped as holes") ||
		!strings.Contains(errOut.String(), "no Secure Boot keys") {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

func TestNoDisk(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-image", t.TempDir(), "-dry-run"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "run make disk first") {
		t.Fatalf("no disk: %v", err)
	}
}

// TestPublishThroughConfigChain runs the command as make publish does,
// against the stand-ins named by AWS_ENDPOINT_URL_EBS/EC2, with
// credentials and region from the environment (the standard chain).
func TestPublishThroughConfigChain(t *testing.T) {
	creds := sigv4.Credentials{AccessKeyID: "AKIACMD", SecretAccessKey: "cmd-secret"}
	es, err := ebs.New(ebs.Config{Credentials: creds, Region: "us-west-2", Account: "111122223333"})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ec2.New(ec2.Config{Credentials: creds, Region: "us-west-2", Account: "111122223333", EBS: es})
	if err != nil {
		t.Fatal(err)
	}
	eu, stop, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	cu, stop, err := cs.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_EBS": eu, "AWS_ENDPOINT_URL_EC2": cu, "AWS_ACCESS_KEY_ID": creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY": creds.SecretAccessKey, "AWS_SESSION_TOKEN": "", "AWS_REGION": "us-west-2", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": ""} {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-image", disk(t), "-uefi-data", ""}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	imgs := cs.Images()
	if len(imgs) != 1 || strings.TrimSpace(out.String()) != imgs[0].ID || imgs[0].Architecture != "x86_64" || imgs[0].UefiData != "" {
		t.Fatalf("stdout %q, images %+v\n%s", out.String(), imgs, errOut.String())
	}
	if !strings.Contains(errOut.String(), "is available in us-west-2") {
		t.Fatalf("stderr %s", errOut.String())
	}
}
