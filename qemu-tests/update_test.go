package qemutests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/update/agent"
	"github.com/berth-node/berth/update/repo"
)

// updateRepo is a TUF update repository the test serves to the guest,
// signed with the keys the test image trusts.
type updateRepo struct {
	dir  string
	keys *repo.Keys
	url  string // as the guest reaches it
}

// updateTestDir is where make update-test-images puts the releases.
func updateTestDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(filepath.Dir(qemu.ImageDir(t)), "update-test")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("the update test's releases: %v (make update-test-images builds them)", err)
	}
	return d
}

// patchNode sets (or, for a nil value, removes) annotations on node, as
// an operator's kubectl annotate or a rollout controller does.
func patchNode(t *testing.T, a api, node string, ann map[string]*string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("PATCH", a.base+"/api/v1/nodes/"+node, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("annotating node %s: %s: %s", node, resp.Status, b)
	}
}

// nodeAnnotations reads node's annotations.
func nodeAnnotations(a api, node string) (map[string]string, error) {
	var n struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	err := a.do("GET", "/api/v1/nodes/"+node, nil, &n)
	return n.Metadata.Annotations, err
}

// waitUpdateState waits until berth says state on the node's Node, and
// returns the annotations then.
func waitUpdateState(t *testing.T, vm *qemu.VM, a api, node, state string, timeout time.Duration) map[string]string {
	t.Helper()
	var ann map[string]string
	waitFor(t, vm, "berth.dev/update-state "+state, timeout, func() (bool, string) {
		var err error
		ann, err = nodeAnnotations(a, node)
		if err != nil {
			return false, err.Error()
		}
		return ann[agent.AnnotationState] == state, fmt.Sprintf("%v", ann)
	})
	return ann
}

func ptr(s string) *string { return &s }

// updateSection is boot.json's update section.
func updateSection(t *testing.T, rep map[string]any) map[string]any {
	t.Helper()
	u, _ := rep["update"].(map[string]any)
	if u == nil {
		t.Fatalf("boot report has no update section: %v", rep)
	}
	return u
}

// TestUpdate is one node's life through two updates, on the signed disk
// with Secure Boot on and its root found by hash: release 1.0.0 (A, the
// test image built with that version) joins; the Node's berth.dev/update-to asks for 1.0.1 (B) from a TUF
// repository the test serves; berth writes B into slot b, stages its UKI
// with three tries and reboots; B boots on trial, joins, stays Ready for
// the soak and is blessed. Then 1.0.2 (C), whose kubelet cannot start:
// it boots on trial into slot a, is not Ready by the deadline, marks
// itself bad and reboots; systemd-boot starts B again, which says on the
// Node that C rolled back and why, and does not try C again. C's staging
// is cut off by QEMU's kill right after its commit, as a power loss
// would: C must boot all the same.
func TestUpdate(t *testing.T) {
	releases := updateTestDir(t)
	dirA := filepath.Join(releases, "1.0.0")
	cluster := startControlPlane(t)
	r := startUpdateRepo(t)
	// A deadline with room for a loaded 2-core host; C's is shorter (its
	// kubelet never starts, so waiting longer proves nothing more).
	const soak, deadline, deadlineC = 20 * time.Second, 8 * time.Minute, 2 * time.Minute
	userData := func(deadline time.Duration) []byte {
		return mimeUserData(strings.Replace(cluster.nodeConfig(), "  annotations:\n", fmt.Sprintf("  annotations:\n    berth.dev/update-repository: %s\n    berth.dev/update-trial-soak: %s\n    berth.dev/update-trial-ready-deadline: %s\n",
			r.url, soak, deadline), 1))
	}
	imds, imdsURL := startIMDS(t, userData(deadline))
	cmdline := "console=ttyS0 quiet berth.onfail=halt berth.debugshell=ttyS1 berth.imds=" + imdsURL
	img, res := testDiskWith(t, dirA, cmdline)
	disk := copyDisk(t, img, res.Layout.Size()+8<<30)
	a := api{c: cluster.Client(), base: cluster.Info().HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	t.Cleanup(func() { _ = a.do("DELETE", "/api/v1/nodes/"+node, nil, nil) })
	// boot starts the node from the disk and waits for its boot report.
	boot := func(name string, report time.Duration) (*qemu.VM, map[string]any) {
		t.Helper()
		cfg := uefiConfig(t, disk)
		cfg.Name = name
		cfg.MemoryMB = 2048
		cfg.Timeout = 20 * time.Minute
		vm := qemu.Start(t, cfg)
		rep, err := vm.Report(report)
		if err != nil {
			t.Fatal(err)
		}
		return vm, rep
	}
	versionA := qemu.ImageManifest(t, dirA).BerthVersion

	vm, rep := boot("update-a", bootTimeout)
	if !reportOK(rep) {
		t.Fatalf("A's boot failed: %v", rep["error"])
	}
	if u := updateSection(t, rep); u["version"] != versionA || u["slot"] != "a" || u["trial"] != false {
		t.Fatalf("A's update section: %v", u)
	}
	ann := waitUpdateState(t, vm, a, node, agent.StateIdle, joinTimeout)
	if ann[agent.AnnotationVersion] != versionA || ann[agent.AnnotationSlot] != "a" {
		t.Errorf("A's annotations: %v", ann)
	}

	t.Run("refused", func(t *testing.T) {
		// A version the repository does not have: refused, nothing written.
		patchNode(t, a, node, map[string]*string{agent.AnnotationUpdateTo: ptr("9.9.9")})
		ann := waitUpdateState(t, vm, a, node, agent.StateRefused, 2*time.Minute)
		if !strings.Contains(ann[agent.AnnotationReason], "9.9.9") || !strings.Contains(ann[agent.AnnotationReason], "no release") {
			t.Errorf("reason for a version the repository lacks: %q", ann[agent.AnnotationReason])
		}
	})

	r.publish(t, filepath.Join(releases, "1.0.1"), cmdline)
	start := time.Now()
	patchNode(t, a, node, map[string]*string{agent.AnnotationUpdateTo: ptr("1.0.1"), agent.AnnotationAllowDowngrade: nil})
	if _, err := vm.Expect(regexp.MustCompile(`update to 1\.0\.1 staged`), 10*time.Minute); err != nil {
		t.Fatalf("A did not stage 1.0.1: %v", err)
	}
	staged := time.Since(start)
	if err := vm.WaitExit(3 * time.Minute); err != nil {
		t.Fatalf("A did not reboot after staging 1.0.1: %v", err)
	}
	logSteps(t, vm)
	figure(t, "update: trigger to 1.0.1 staged %.0f s, to reboot %.0f s", staged.Seconds(), time.Since(start).Seconds())

	vm, rep = boot("update-b", bootTimeout)
	if !reportOK(rep) {
		t.Fatalf("B's boot failed: %v", rep["error"])
	}
	if u := updateSection(t, rep); u["version"] != "1.0.1" || u["slot"] != "b" || u["trial"] != true || u["entry"] != "berth-1.0.1+2-1.efi" {
		t.Fatalf("B's first boot: update section %v, want 1.0.1 from slot b on trial (berth-1.0.1+2-1.efi)", u)
	}
	ann = waitUpdateState(t, vm, a, node, agent.StateBlessed, deadline+soak+time.Minute)
	figure(t, "update: trigger to 1.0.1 blessed %.0f s", time.Since(start).Seconds())
	if ann[agent.AnnotationVersion] != "1.0.1" || ann[agent.AnnotationSlot] != "b" || !strings.Contains(ann[agent.AnnotationReason], "kubelet Ready") {
		t.Errorf("B's annotations once blessed: %v", ann)
	}
	if _, err := vm.Expect(regexp.MustCompile(`update: blessed.*berth-1\.0\.1\.efi`), time.Minute); err != nil {
		t.Error(err)
	}

	r.publish(t, filepath.Join(releases, "1.0.2"), cmdline)
	start = time.Now()
	patchNode(t, a, node, map[string]*string{agent.AnnotationUpdateTo: ptr("1.0.2")})
	// Power lost at the commit: QEMU killed as soon as the UKI's rename
	// is logged, before berth records it or reboots in order. The rename
	// was synced, so the next boot tries 1.0.2.
	if _, err := vm.Expect(regexp.MustCompile(`update staged: the next boot tries it.*to=1\.0\.2`), 10*time.Minute); err != nil {
		t.Fatalf("B did not stage 1.0.2: %v", err)
	}
	if err := vm.Close(); err != nil {
		t.Fatal(err)
	}
	logSteps(t, vm)

	// The operator shortens the trial's deadline in the user data C boots
	// with.
	if err := imds.SetUserData(userData(deadlineC)); err != nil {
		t.Fatal(err)
	}
	// C's trial fails while berth still waits for its kubelet, before the
	// boot report: the console's update-state line says what booted.
	cfg := uefiConfig(t, disk)
	cfg.Name, cfg.MemoryMB, cfg.Timeout = "update-c", 2048, 20*time.Minute
	vm = qemu.Start(t, cfg)
	if _, err := vm.Expect(regexp.MustCompile(`update state version=1\.0\.2 slot=a slot_by=hash boot=systemd-boot entry=berth-1\.0\.2\+2-1\.efi trial=true`), bootTimeout); err != nil {
		t.Fatalf("C's boot: want 1.0.2 from slot a on trial: %v", err)
	}
	failed := time.Now()
	if _, err := vm.Expect(regexp.MustCompile(`trial failed; rebooting into the previous version`), deadlineC+5*time.Minute); err != nil {
		t.Fatalf("C's failed trial did not roll back: %v", err)
	}
	if err := vm.WaitExit(3 * time.Minute); err != nil {
		t.Fatalf("C did not reboot after its failed trial: %v", err)
	}

	vm, rep = boot("update-b-again", bootTimeout)
	if !reportOK(rep) {
		t.Fatalf("B's boot after the rollback failed: %v", rep["error"])
	}
	if u := updateSection(t, rep); u["version"] != "1.0.1" || u["slot"] != "b" || u["trial"] != false {
		t.Fatalf("after C's rollback: update section %v, want 1.0.1 from slot b, not on trial", u)
	}
	ann = waitUpdateState(t, vm, a, node, agent.StateRolledBack, joinTimeout)
	figure(t, "update: 1.0.2's failed trial noticed to 1.0.1 back on the Node %.0f s (from 1.0.2's boot: %.0f s)", time.Since(failed).Seconds(), time.Since(start).Seconds())
	if !strings.Contains(ann[agent.AnnotationReason], "kubelet not Ready within 2m0s") || ann[agent.AnnotationVersion] != "1.0.1" {
		t.Errorf("annotations after C's rollback: %v", ann)
	}
	waitNodeReady(t, vm, a, node)
	// The trigger still names C: it is not tried again.
	time.Sleep(3 * agent.DefaultPoll)
	if ann, _ := nodeAnnotations(a, node); ann[agent.AnnotationState] != agent.StateRolledBack {
		t.Errorf("after a rollback, with berth.dev/update-to still 1.0.2: %v", ann)
	}
	if vm.Exited() {
		t.Fatal("B rebooted again after C's rollback")
	}
	if err := vm.PowerDown(); err != nil {
		t.Fatal(err)
	}
	if err := vm.WaitExit(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
}

// logSteps logs the update's steps as the console showed them.
func logSteps(t *testing.T, vm *qemu.VM) {
	t.Helper()
	re := regexp.MustCompile(`update step|update staged|update: `)
	for _, l := range vm.Lines() {
		if re.MatchString(l.Text) {
			t.Log(l.Text)
		}
	}
}

// startUpdateRepo makes an update repository signed with the keys the
// test image trusts and serves it on the host's loopback.
func startUpdateRepo(t *testing.T) *updateRepo {
	t.Helper()
	keysDir := filepath.Join(filepath.Dir(qemu.ImageDir(t)), "keys", "update")
	keys, err := repo.LoadKeys(keysDir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.ReadFile(filepath.Join(keysDir, repo.TrustedRootFile))
	if err != nil {
		t.Fatal(err)
	}
	if m := qemu.ImageManifest(t, qemu.ImageDir(t)); m.Update == nil {
		t.Fatal("the test image carries no trusted update root (make image-test passes make keys' update/root.json)")
	}
	dir := t.TempDir()
	if err := repo.InitFrom(context.Background(), dir, keys, root, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	return &updateRepo{dir: dir, keys: keys, url: "http://10.0.2.2:" + port}
}

// publish adds the release built in dir to the repository: its root image
// and a UKI sealing cmdline, signed with the test keys, as the disk of
// that build carries it.
func (r *updateRepo) publish(t *testing.T, dir, cmdline string) {
	t.Helper()
	img, res := testDiskWith(t, dir, cmdline)
	m := qemu.ImageManifest(t, dir)
	uki := filepath.Join(t.TempDir(), "berth.efi")
	if err := os.WriteFile(uki, espFile(t, img, res.Layout, res.UKI), 0o644); err != nil {
		t.Fatal(err)
	}
	// The root image is what the disk's slot a holds: the filesystem,
	// then its hash tree at once (no superblock).
	p, _, ok := res.Layout.Find(partition.SlotA.PartName())
	if !ok {
		t.Fatalf("disk layout %s has no slot a", res.Layout)
	}
	n := int64(res.Verity.HashStartBlock)*4096 + iverity.HashSize(res.Verity.DataBlocks, false)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := filepath.Join(t.TempDir(), "root.img")
	out, err := os.Create(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, io.NewSectionReader(f, p.Offset(), n)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := repo.Add(context.Background(), r.dir, r.keys, repo.NewRelease{Arch: m.Arch, Version: m.BerthVersion, RootHash: res.RootHash,
		UKI: uki, Root: root}, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	figure(t, "update: release %s: UKI %d bytes, root image %d bytes", m.BerthVersion, fileSize(t, uki), n)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
