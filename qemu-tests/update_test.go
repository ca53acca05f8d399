package qemutests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	iverity "github.com/berth-node/berth/image/verity"
	"github.com/berth-node/berth/mounts/partition"
	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/update/agent"
	"github.com/berth-node/berth/update/apply"
	"github.com/berth-node/berth/update/repo"
	"github.com/u-root/u-root/pkg/cpio"
)

// updateRepo is a TUF update repository the test serves to the guest,
// signed with the keys the test image trusts.
type updateRepo struct {
	dir  string
	keys *repo.Keys
	url  string // as the guest reaches it
	// host is the server's address on the host's loopback, which a rig
	// forwards to.
	host netip.AddrPort
	// served is the directory the server serves: dir, but while a test
	// serves a broken repository in its place.
	served atomic.Pointer[string]
}

// serve makes the server serve dir in the repository's place.
func (r *updateRepo) serve(dir string) { r.served.Store(&dir) }

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
	return waitUpdateReason(t, vm, a, node, state, "", timeout)
}

// waitUpdateReason is waitUpdateState for a state whose reason says
// reason too: the state alone may be left from the request before.
func waitUpdateReason(t *testing.T, vm *qemu.VM, a api, node, state, reason string, timeout time.Duration) map[string]string {
	t.Helper()
	var ann map[string]string
	waitFor(t, vm, fmt.Sprintf("berth.dev/update-state %s saying %q", state, reason), timeout, func() (bool, string) {
		var err error
		ann, err = nodeAnnotations(a, node)
		if err != nil {
			return false, err.Error()
		}
		return ann[agent.AnnotationState] == state && strings.Contains(ann[agent.AnnotationReason], reason), fmt.Sprintf("%v", ann)
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

// TestUpdate is one node's life through its updates, on the signed disk
// with Secure Boot on and its root found by hash, against a TUF
// repository the test serves:
//   - release 1.0.0 (A, the test image built with that version) joins;
//   - A refuses, writing nothing: a version the repository lacks, a
//     repository signed with other keys, expired metadata, a corrupt UKI;
//   - A's update to 1.0.1 (B) is cut off by QEMU's kill while the slot is
//     written: A boots again, says so, and takes the trigger up again;
//   - B boots on trial from slot b, joins, stays Ready for the soak and is
//     blessed; it refuses 1.0.0, an older version, unasked;
//   - 1.0.3 (D), whose initramfs has no init, panics before berth runs,
//     three times; systemd-boot's counter runs out and B boots again,
//     saying D used up its tries, and does not try D again while the
//     Node still asks for it.
//
// A release whose kubelet never becomes Ready, cut off by a power loss
// right after its commit, is TestRollout's second rollout: the node
// rolls back by itself there, and the rollout stops on it.
func TestUpdate(t *testing.T) {
	releases := updateTestDir(t)
	dirA, dirB, dirC := filepath.Join(releases, "1.0.0"), filepath.Join(releases, "1.0.1"), filepath.Join(releases, "1.0.2")
	cluster := startControlPlane(t)
	r := startUpdateRepo(t)
	// A deadline with room for a loaded 2-core host.
	const soak, deadline = 20 * time.Second, 8 * time.Minute
	userData := func(deadline time.Duration) []byte {
		return mimeUserData(strings.Replace(cluster.nodeConfig(), "  annotations:\n", fmt.Sprintf("  annotations:\n    berth.dev/update-repository: %s\n    berth.dev/update-trial-soak: %s\n    berth.dev/update-trial-ready-deadline: %s\n",
			r.url, soak, deadline), 1))
	}
	_, imdsURL := startIMDS(t, userData(deadline))
	cmdline := "console=ttyS0 quiet berth.onfail=halt berth.debugshell=ttyS1 berth.imds=" + imdsURL
	img, res := testDiskWith(t, dirA, cmdline)
	disk := copyDisk(t, img, res.Layout.Size()+8<<30)
	a := api{c: cluster.Client(), base: cluster.Info().HostEndpoint}
	node := "ip-10-0-2-15.us-west-2.compute.internal"
	t.Cleanup(func() { _ = a.do("DELETE", "/api/v1/nodes/"+node, nil, nil) })
	// start starts the node from the disk; boot waits for its report too.
	start := func(name string) *qemu.VM {
		t.Helper()
		cfg := uefiConfig(t, disk)
		cfg.Name, cfg.MemoryMB, cfg.Timeout = name, 2048, 20*time.Minute
		return qemu.Start(t, cfg)
	}
	boot := func(name string) (*qemu.VM, map[string]any) {
		t.Helper()
		vm := start(name)
		rep, err := vm.Report(bootTimeout)
		if err != nil {
			t.Fatal(err)
		}
		if !reportOK(rep) {
			t.Fatalf("%s: the boot failed: %v", name, rep["error"])
		}
		return vm, rep
	}
	// hangPanic is the kernel's panics on a hung task and on a soft
	// lockup as the guest has them: the image boots with them on,
	// berth's sysctls turn them off, a trial boot keeps them on until
	// blessed. The agent arms them from its own goroutine, which a busy
	// host may run after the boot report: looked at until they say want,
	// for a minute.
	hangPanic := func(vm *qemu.VM, want, when string) {
		t.Helper()
		const cmd = "cat /proc/sys/kernel/hung_task_panic /proc/sys/kernel/softlockup_panic"
		var got string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
			out, err := vm.Shell(cmd, time.Minute)
			if err != nil {
				t.Errorf("%s: %s: %v", when, cmd, err)
				return
			}
			if got = strings.Join(strings.Fields(out), " "); got == want+" "+want || time.Now().After(deadline) {
				break
			}
		}
		if got != want+" "+want {
			t.Errorf("%s: kernel.hung_task_panic and kernel.softlockup_panic = %q for a minute, want %s both", when, got, want)
		}
	}
	trigger := func(to string) {
		t.Helper()
		patchNode(t, a, node, map[string]*string{agent.AnnotationUpdateTo: ptr(to)})
	}
	versionA := qemu.ImageManifest(t, dirA).BerthVersion
	r.publish(t, dirA, cmdline)
	relB := release(t, dirB, cmdline)
	if err := repo.Add(context.Background(), r.dir, r.keys, relB, repo.Options{}); err != nil {
		t.Fatal(err)
	}

	vm, rep := boot("update-a")
	if u := updateSection(t, rep); u["version"] != versionA || u["slot"] != "a" || u["trial"] != false {
		t.Fatalf("A's update section: %v", u)
	}
	ann := waitUpdateState(t, vm, a, node, agent.StateIdle, joinTimeout)
	if ann[agent.AnnotationVersion] != versionA || ann[agent.AnnotationSlot] != "a" {
		t.Errorf("A's annotations: %v", ann)
	}
	hangPanic(vm, "0", "A, not on trial")
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "held armed for the trial boot") {
			t.Errorf("A, not on trial, held the hang panics armed: %s", l.Text)
		}
	}

	// Each refusal says why on the Node. A repository's own trouble
	// (other keys, expired metadata) is a failure, tried again later as
	// the repository may be mended; a release that is wrong is refused
	// until the trigger changes.
	refusals := []struct {
		name, to, state string
		serve           func() string
		want            []string
	}{
		{"missing version", "9.9.9", agent.StateRefused, func() string { return r.dir }, []string{"9.9.9", "no release"}},
		{"other keys", "1.0.1", agent.StateFailed, func() string { return otherKeysRepo(t, relB) }, []string{repo.ErrSignature.Error()}},
		// Another version asked for: a new request, tried at once.
		{"expired", "1.0.2", agent.StateFailed, func() string { return r.expiredCopy(t) }, []string{repo.ErrExpired.Error(), "timestamp"}},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			r.serve(c.serve())
			trigger(c.to)
			ann := waitUpdateReason(t, vm, a, node, c.state, c.want[0], 2*time.Minute)
			for _, w := range c.want[1:] {
				if !strings.Contains(ann[agent.AnnotationReason], w) {
					t.Errorf("reason = %q, want it to say %q", ann[agent.AnnotationReason], w)
				}
			}
		})
	}
	r.serve(r.dir)
	t.Run("corrupt UKI", func(t *testing.T) {
		restore := r.corruptTarget(t, "amd64/1.0.1/berth.efi")
		defer restore()
		trigger("1.0.1")
		ann := waitUpdateReason(t, vm, a, node, agent.StateRefused, repo.ErrCorrupt.Error(), 3*time.Minute)
		if !strings.Contains(ann[agent.AnnotationReason], "berth.efi") || !strings.Contains(ann[agent.AnnotationReason], apply.StepReadUKI) {
			t.Errorf("reason for a corrupt UKI = %q", ann[agent.AnnotationReason])
		}
	})
	// Nothing was written: no step beyond checking the target.
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, "update step done") && !strings.Contains(l.Text, "step="+apply.StepTarget) {
			t.Errorf("a refused update did: %s", l.Text)
		}
	}

	// The UKI mended, the same request is set again (removed first, as
	// an operator does). Power is lost while B's root is written: A
	// boots again, untouched.
	patchNode(t, a, node, map[string]*string{agent.AnnotationUpdateTo: nil})
	if _, err := vm.Expect(regexp.MustCompile(`the Node no longer asks for an update`), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	startB := time.Now()
	seen := len(vm.Lines())
	trigger("1.0.1")
	if err := expectNew(vm, regexp.MustCompile(`update step done.*step=`+apply.StepPruneESP), seen, 10*time.Minute); err != nil {
		t.Fatalf("A did not start writing 1.0.1: %v", err)
	}
	if err := vm.Close(); err != nil {
		t.Fatal(err)
	}
	logSteps(t, vm)

	vm, rep = boot("update-a-cut")
	if u := updateSection(t, rep); u["version"] != versionA || u["slot"] != "a" || u["trial"] != false {
		t.Fatalf("A's boot after the cut: update section %v", u)
	}
	if _, err := vm.Expect(regexp.MustCompile(`update: last update result=failed.*cut off before it was committed`), time.Minute); err != nil {
		t.Error(err)
	}
	if _, err := vm.Expect(regexp.MustCompile(`update to 1\.0\.1 staged`), 10*time.Minute); err != nil {
		t.Fatalf("A did not stage 1.0.1 again: %v", err)
	}
	staged := time.Since(startB)
	if err := vm.WaitExit(3 * time.Minute); err != nil {
		t.Fatalf("A did not reboot after staging 1.0.1: %v", err)
	}
	logSteps(t, vm)
	figure(t, "update: trigger to 1.0.1 staged %.0f s (a cut-off write and A's boot between)", staged.Seconds())

	vm, rep = boot("update-b")
	if u := updateSection(t, rep); u["version"] != "1.0.1" || u["slot"] != "b" || u["trial"] != true || u["entry"] != "berth-1.0.1+2-1.efi" {
		t.Fatalf("B's first boot: update section %v, want 1.0.1 from slot b on trial (berth-1.0.1+2-1.efi)", u)
	}
	booted := time.Now()
	hangPanic(vm, "1", "B on trial")
	// Never written 0 on the trial boot, not even for the moment before
	// the agent arms them: the apply phase held them as the image's
	// command line armed them.
	if _, err := vm.Expect(regexp.MustCompile(`sysctls held armed for the trial boot.*kernel\.hung_task_panic.*kernel\.softlockup_panic`), time.Minute); err != nil {
		t.Error(err)
	}
	ann = waitUpdateState(t, vm, a, node, agent.StateBlessed, deadline+soak+time.Minute)
	figure(t, "update: 1.0.1's boot report to blessed %.0f s", time.Since(booted).Seconds())
	if ann[agent.AnnotationVersion] != "1.0.1" || ann[agent.AnnotationSlot] != "b" || !strings.Contains(ann[agent.AnnotationReason], "kubelet Ready") {
		t.Errorf("B's annotations once blessed: %v", ann)
	}
	if _, err := vm.Expect(regexp.MustCompile(`update: blessed.*berth-1\.0\.1\.efi`), time.Minute); err != nil {
		t.Error(err)
	}
	hangPanic(vm, "0", "B, blessed")

	t.Run("older", func(t *testing.T) {
		trigger(versionA)
		ann := waitUpdateReason(t, vm, a, node, agent.StateRefused, "older", 2*time.Minute)
		if !strings.Contains(ann[agent.AnnotationReason], versionA) {
			t.Errorf("reason for an older version, unasked = %q", ann[agent.AnnotationReason])
		}
	})

	// D panics before berth runs: systemd-boot counts its three tries
	// down, one per panic (panic= reboots), and then starts B.
	r.publish(t, noInitRelease(t, dirC, "1.0.3"), cmdline)
	trigger("1.0.3")
	if _, err := vm.Expect(regexp.MustCompile(`update to 1\.0\.3 staged`), 10*time.Minute); err != nil {
		t.Fatalf("B did not stage 1.0.3: %v", err)
	}
	if err := vm.WaitExit(3 * time.Minute); err != nil {
		t.Fatalf("B did not reboot after staging 1.0.3: %v", err)
	}
	panicked := time.Now()
	for try := 1; try <= 3; try++ {
		vm = start(fmt.Sprintf("update-d-%d", try))
		if _, err := vm.Expect(regexp.MustCompile(`Kernel panic`), bootTimeout); err != nil {
			t.Fatalf("D's try %d: no kernel panic: %v", try, err)
		}
		if err := vm.WaitExit(2 * time.Minute); err != nil {
			t.Fatalf("D's try %d: the panic did not reboot: %v", try, err)
		}
	}
	vm, rep = boot("update-b-after-d")
	if u := updateSection(t, rep); u["version"] != "1.0.1" || u["slot"] != "b" || u["trial"] != false {
		t.Fatalf("after D's tries ran out: update section %v, want 1.0.1 from slot b, not on trial", u)
	}
	ann = waitUpdateState(t, vm, a, node, agent.StateRolledBack, joinTimeout)
	if !strings.Contains(ann[agent.AnnotationReason], "1.0.3 used up its 3 tries") {
		t.Errorf("annotations after D's tries ran out: %v", ann)
	}
	figure(t, "update: 1.0.3's first panic to 1.0.1 back on the Node %.0f s", time.Since(panicked).Seconds())
	waitNodeReady(t, vm, a, node)
	// The trigger still names D: it is not tried again.
	time.Sleep(3 * agent.DefaultPoll)
	if ann, _ := nodeAnnotations(a, node); ann[agent.AnnotationState] != agent.StateRolledBack {
		t.Errorf("after a rollback, with berth.dev/update-to still 1.0.3: %v", ann)
	}
	if vm.Exited() {
		t.Fatal("B rebooted again after D's rollback")
	}
}

// expectNew waits for a console line matching re among those after the
// first seen (vm.Expect looks at every line since boot).
func expectNew(vm *qemu.VM, re *regexp.Regexp, seen int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		lines := vm.Lines()
		for _, l := range lines[min(seen, len(lines)):] {
			if re.MatchString(l.Text) {
				return nil
			}
		}
		if time.Now().After(deadline) || vm.Exited() {
			return fmt.Errorf("no console line matching %q after line %d within %s (exited: %v)", re, seen, timeout, vm.Exited())
		}
		time.Sleep(200 * time.Millisecond)
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
	r := &updateRepo{dir: dir, keys: keys}
	r.serve(dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.FileServer(http.Dir(*r.served.Load())).ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	host, err := netip.ParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatalf("the update repository's address %s: %v", srv.URL, err)
	}
	r.host = host
	r.url = fmt.Sprintf("http://10.0.2.2:%d", host.Port())
	return r
}

// publish adds the release built in dir to the repository.
func (r *updateRepo) publish(t *testing.T, dir, cmdline string) {
	t.Helper()
	rel := release(t, dir, cmdline)
	if err := repo.Add(context.Background(), r.dir, r.keys, rel, repo.Options{}); err != nil {
		t.Fatal(err)
	}
}

// release is the release built in dir as make update-repo publishes it:
// its root image and a UKI sealing cmdline, signed with the test keys, as
// the disk of that build carries it.
func release(t *testing.T, dir, cmdline string) repo.NewRelease {
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
	figure(t, "update: release %s: UKI %d bytes, root image %d bytes", m.BerthVersion, fileSize(t, uki), n)
	return repo.NewRelease{Arch: m.Arch, Version: m.BerthVersion, RootHash: res.RootHash, UKI: uki, Root: root}
}

// otherKeysRepo is a repository holding rel, made and signed with keys
// of its own, which the test image does not trust.
func otherKeysRepo(t *testing.T, rel repo.NewRelease) string {
	t.Helper()
	keys, err := repo.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := repo.Init(context.Background(), dir, keys, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Add(context.Background(), dir, keys, rel, repo.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expiredCopy is a copy of r's repository whose metadata was last signed
// eight days ago: its timestamp (valid for a week) has expired.
func (r *updateRepo) expiredCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(r.dir)); err != nil {
		t.Fatal(err)
	}
	past := func() time.Time { return time.Now().Add(-8 * 24 * time.Hour) }
	if err := repo.Refresh(context.Background(), dir, r.keys, repo.Options{Now: past}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// corruptTarget flips a byte in the middle of the repository's file for
// target (as its metadata names it: arch/version/file), and returns a
// func that puts the byte back.
func (r *updateRepo) corruptTarget(t *testing.T, target string) (restore func()) {
	t.Helper()
	dir, name := filepath.Split(filepath.FromSlash(target))
	files, err := filepath.Glob(filepath.Join(r.dir, "targets", dir, "*."+name))
	if err != nil || len(files) != 1 {
		t.Fatalf("the repository's files for %s: %v %v", target, files, err)
	}
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := st.Size() / 2
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^b[0]}, at); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		f, err := os.OpenFile(files[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
}

// noInitRelease is a release directory for version: from's kernel and
// root, but an initramfs without /init, so the kernel panics before
// berth runs (panic= in the image's kernel arguments reboots it).
func noInitRelease(t *testing.T, from, version string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"vmlinuz", "root.erofs"} {
		if err := os.Symlink(filepath.Join(from, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.Create(filepath.Join(dir, "initramfs.img"))
	if err != nil {
		t.Fatal(err)
	}
	w := cpio.Newc.Writer(out)
	if err := cpio.WriteRecords(w, []cpio.Record{cpio.StaticFile("README", "this initramfs has no init\n", 0o644)}); err != nil {
		t.Fatal(err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(from, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["berthVersion"] = version
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
