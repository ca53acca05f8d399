//go:build components

package nodeconfig_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-node/berth/internal/safe"
	"github.com/berth-node/berth/internal/syncbuf"
)

// sandboxEnv marks the test binary re-executed as the sandbox's first
// process (TestMain runs sandboxMain instead of the tests).
const sandboxEnv = "BERTH_ORACLE_SANDBOX"

func TestMain(m *testing.M) {
	if os.Getenv(sandboxEnv) != "" {
		if err := sandboxMain(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "oracle sandbox: %v\n", err)
			os.Exit(120)
		}
	}
	os.Exit(m.Run())
}

// sandboxMain runs in new user, mount and network namespaces as their root,
// which is an unprivileged user of the host (sandbox.command): it puts the
// host's /proc, /sys and /dev into root, the program at /usr/bin/NAME,
// chroots into root and execs the program. The program then finds the
// node's files at the node's own paths, and has no network and no way to
// change anything of the host's.
func sandboxMain(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("want ROOT PROGRAM [ARG...], got %q", args)
	}
	root, prog := args[0], args[1]
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mount namespace private: %w", err)
	}
	// The root is a mount of its own, so that kubelet finds a mount
	// point for its root directory (/ inside) in the mount table.
	if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding the root onto itself: %w", err)
	}
	for _, d := range []string{"proc", "sys", "dev"} {
		if err := unix.Mount("/"+d, filepath.Join(root, d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding /%s: %w", d, err)
		}
	}
	// kubelet's OOM watcher opens /dev/kmsg, which only the host's root
	// may read: a quiet stand-in (prepare's empty file) instead.
	if err := unix.Mount(filepath.Join(root, kmsgStandIn), filepath.Join(root, "dev/kmsg"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding the /dev/kmsg stand-in: %w", err)
	}
	inside := "/usr/bin/" + filepath.Base(prog)
	if err := unix.Mount(prog, filepath.Join(root, inside), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s: %w", prog, err)
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=/"}
	return syscall.Exec(inside, append([]string{filepath.Base(prog)}, args[2:]...), env)
}

// kmsgStandIn is the file, under the sandbox's root, bound over /dev/kmsg.
const kmsgStandIn = "kmsg"

// sandbox starts programs in sandboxMain's namespaces.
type sandbox struct {
	// dir holds the helper and every case's files.
	dir string
	// helper is a copy of the test binary that the sandbox's user can
	// execute (go test's own directory is private to root).
	helper string
	// uid is the host user the sandbox's root is: nobody when the test
	// runs as root, else the test's own user.
	uid int
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parent is private to the test's user.
	dir, err := os.MkdirTemp("", "berth-oracle-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "oracle-sandbox")
	if err := copyFile(self, helper, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &sandbox{dir: dir, helper: helper, uid: os.Getuid()}
	if s.uid == 0 {
		s.uid = 65534
	}
	return s
}

// tempDir is a new directory the sandbox's user can reach.
func (s *sandbox) tempDir() (string, error) {
	d, err := os.MkdirTemp(s.dir, "case-")
	if err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o755)
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	return out.Close()
}

// prepare makes root a tree the sandbox's user owns, with the mount
// points sandboxMain needs, and files at their node paths.
func (s *sandbox) prepare(root, prog string, files map[string][]byte) error {
	for _, d := range []string{"proc", "sys", "dev", "usr/bin", "tmp", "var/lib", "var/log", "run", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin", filepath.Base(prog)), nil, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, kmsgStandIn), nil, 0o644); err != nil {
		return err
	}
	for p, data := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if bytes.HasPrefix(data, []byte("#!")) {
			mode = 0o755 // a program kubelet looks for, not runs
		}
		if err := os.WriteFile(f, data, mode); err != nil {
			return err
		}
	}
	if os.Getuid() != 0 {
		return nil
	}
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, s.uid, s.uid)
	})
}

// command is prog with args in a sandbox rooted at root.
func (s *sandbox) command(ctx context.Context, root, prog string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.helper, append([]string{root, prog}, args...)...)
	cmd.Env = []string{sandboxEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: s.uid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		// Without it the child stays the host's root, which the new user
		// namespace does not map: it would have no capability there.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		Pdeathsig:  syscall.SIGKILL,
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// fakeCRI is a container runtime that answers the calls kubelet makes
// while it starts, and says when the first call comes that kubelet makes
// only from its main loop (acceptMethod).
type fakeCRI struct {
	srv     *grpc.Server
	reached chan struct{}
	once    sync.Once
	mu      sync.Mutex
	calls   []string
}

// acceptMethod is kubelet's runtime status poll (Kubelet.updateRuntimeUp),
// started by Kubelet.Run. Every check of kubelet's config and flags comes
// before it: command-line parsing, the config file and drop-ins, the
// feature gates, ValidateKubeletConfiguration and ValidateKubeletServer,
// the TLS options, then in run() the reserved resources and the hard
// eviction thresholds, and in NewMainKubelet every eviction threshold,
// the image GC policy and the rest of the kubelet's construction.
const acceptMethod = "/runtime.v1.RuntimeService/Status"

func startFakeCRI(log *slog.Logger, sock string, uid int) (*fakeCRI, error) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("fake CRI: %w", err)
	}
	if os.Getuid() == 0 {
		if err := os.Lchown(sock, uid, uid); err != nil {
			l.Close()
			return nil, err
		}
	}
	f := &fakeCRI{reached: make(chan struct{})}
	f.srv = grpc.NewServer(grpc.UnknownServiceHandler(f.handle))
	safe.Go(log, "fake CRI", func() { _ = f.srv.Serve(l) }, nil)
	return f, nil
}

func (f *fakeCRI) stop() { f.srv.Stop() }

func (f *fakeCRI) handle(_ any, st grpc.ServerStream) error {
	m, _ := grpc.MethodFromServerStream(st)
	f.mu.Lock()
	f.calls = append(f.calls, m)
	f.mu.Unlock()
	if m == acceptMethod {
		f.once.Do(func() { close(f.reached) })
	}
	var req, resp any
	switch m {
	case "/runtime.v1.RuntimeService/Version":
		req, resp = &runtimeapi.VersionRequest{}, &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "berth-oracle", RuntimeVersion: "0.1.0", RuntimeApiVersion: "v1"}
	case "/runtime.v1.RuntimeService/RuntimeConfig":
		req, resp = &runtimeapi.RuntimeConfigRequest{}, &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}
	case "/runtime.v1.ImageService/ImageFsInfo":
		req, resp = &runtimeapi.ImageFsInfoRequest{}, &runtimeapi.ImageFsInfoResponse{}
	case acceptMethod:
		req, resp = &runtimeapi.StatusRequest{}, &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	default:
		return status.Errorf(codes.Unimplemented, "the oracle's fake CRI does not serve %s", m)
	}
	if err := st.RecvMsg(req); err != nil {
		return err
	}
	return st.SendMsg(resp)
}

func (f *fakeCRI) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// verdict is what one component made of its input.
type verdict struct {
	accepted bool
	// why is the component's own error line when it refused.
	why string
}

// runKubelet starts kubelet in a sandbox on files (node path → content)
// with argv (without argv[0]) and a fake CRI at berth's containerd socket,
// and waits until kubelet reaches acceptMethod (accepted) or exits
// (refused). Running past the deadline is an error: neither verdict.
func runKubelet(ctx context.Context, log *slog.Logger, s *sandbox, kubeletBin, dir, sock string, files map[string][]byte, argv []string) (verdict, error) {
	root := filepath.Join(dir, "root")
	if err := s.prepare(root, kubeletBin, files); err != nil {
		return verdict{}, err
	}
	hostSock := filepath.Join(root, sock)
	if err := os.MkdirAll(filepath.Dir(hostSock), 0o755); err != nil {
		return verdict{}, err
	}
	if err := os.Lchown(filepath.Dir(hostSock), s.uid, s.uid); err != nil && os.Getuid() == 0 {
		return verdict{}, err
	}
	cri, err := startFakeCRI(log, hostSock, s.uid)
	if err != nil {
		return verdict{}, err
	}
	defer cri.stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out syncbuf.Buffer
	cmd := s.command(ctx, root, kubeletBin, argv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return verdict{}, fmt.Errorf("starting kubelet in the sandbox: %w", err)
	}
	exited := make(chan error, 1)
	safe.Go(log, "kubelet wait", func() { exited <- cmd.Wait() }, nil)
	select {
	case <-cri.reached:
		// Kubelet.Run polls the runtime while startKubelet's server goes
		// on beside it: a listen that fails (an address that is no IP)
		// stops kubelet after this point. Accepted once its main server
		// listens, on the port its "Starting to listen" line names: the
		// healthz server listens on 127.0.0.1 whatever the address, and
		// waiting for any socket raced the main server's failed listen
		// (config-address-word judged accepted on a loaded CI host).
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if port, ok := mainServerPort(out.String()); ok && listening(cmd.Process.Pid, port) {
				cancel()
				<-exited
				return verdict{accepted: true}, nil
			}
			select {
			case err := <-exited:
				return verdict{why: fmt.Sprintf("kubelet stopped after its first runtime status (%v): %s", err, kubeletError(out.String()))}, nil
			case <-ctx.Done():
				<-exited
				return verdict{}, fmt.Errorf("kubelet reached %s but did not listen before the deadline; its log:\n%s", acceptMethod, tail(out.String(), 4000))
			case <-tick.C:
			}
		}
	case err := <-exited:
		if err == nil {
			// --help, --version: it printed and left.
			return verdict{why: "kubelet exited 0 before running: " + tail(strings.TrimSpace(out.String()), 200)}, nil
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return verdict{}, fmt.Errorf("kubelet: %v\n%s", err, out.String())
		}
		if ee.ExitCode() == 120 {
			return verdict{}, fmt.Errorf("the sandbox failed, not kubelet: %s", out.String())
		}
		return verdict{why: kubeletError(out.String())}, nil
	case <-ctx.Done():
		<-exited
		return verdict{}, fmt.Errorf("kubelet neither reached %s nor exited before the deadline; CRI calls %v; its log:\n%s", acceptMethod, cri.called(), tail(out.String(), 4000))
	}
}

// mainServerLine is kubelet's log line as its main server starts
// (pkg/kubelet/server.ListenAndServeKubeletServer), in klog's text
// format ("Starting to listen" address="0.0.0.0" port=10250) or its json
// one ("msg":"Starting to listen","address":"0.0.0.0","port":10250); the
// read-only server's says "Starting to listen read-only".
var mainServerLine = regexp.MustCompile(`Starting to listen"[^\n]*?\bport"?[=:](\d+)`)

// mainServerPort is the port kubelet's main server is about to listen on,
// once its log says so.
func mainServerPort(log string) (int, bool) {
	m := mainServerLine.FindStringSubmatch(log)
	if m == nil {
		return 0, false
	}
	port, err := strconv.Atoi(m[1])
	return port, err == nil
}

// listening says whether process pid has a TCP socket listening on port,
// in its network namespace (the sandbox's).
func listening(pid, port int) bool {
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ...: local_address is
			// ADDR:PORT in hex, and st 0A is LISTEN.
			fields := strings.Fields(line)
			if len(fields) <= 3 || fields[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				return true
			}
		}
	}
	return false
}

// kubeletError is the line of kubelet's log that says why it stopped:
// its "command failed" line, else its last error line, else the last line.
func kubeletError(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "command failed") {
			return lines[i]
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "E") || strings.HasPrefix(lines[i], "F") || strings.HasPrefix(lines[i], "panic") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// runContainerd starts containerd in a sandbox on files (node path →
// content) with berth's arguments, and asks its CRI service for its
// version: an answer means containerd read its config and loaded the CRI
// plugins with it (their config sections are decoded only then, not by
// `config dump`; the base runtime spec is read then too). containerd
// exiting, or running without CRI, is a refusal.
func runContainerd(ctx context.Context, log *slog.Logger, s *sandbox, bin, dir, sock string, files map[string][]byte, argv []string) (verdict, error) {
	root := filepath.Join(dir, "root")
	if err := s.prepare(root, bin, files); err != nil {
		return verdict{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out syncbuf.Buffer
	cmd := s.command(ctx, root, bin, argv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return verdict{}, fmt.Errorf("starting containerd in the sandbox: %w", err)
	}
	exited := make(chan error, 1)
	safe.Go(log, "containerd wait", func() { exited <- cmd.Wait() }, nil)
	stop := func() { cancel(); <-exited }
	hostSock := filepath.Join(root, sock)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 120 {
				return verdict{}, fmt.Errorf("the sandbox failed, not containerd: %s", out.String())
			}
			return verdict{why: containerdError(out.String())}, nil
		case <-ctx.Done():
			stop()
			return verdict{}, fmt.Errorf("containerd neither booted nor exited before the deadline; its log:\n%s", tail(out.String(), 4000))
		case <-tick.C:
		}
		// containerd says so once every plugin has loaded (or failed to)
		// and it serves; then berth's socket must answer CRI.
		if !strings.Contains(out.String(), "containerd successfully booted") {
			continue
		}
		ok, why, err := criVersion(ctx, hostSock)
		stop()
		switch {
		case err != nil:
			return verdict{why: fmt.Sprintf("containerd booted but does not serve CRI at %s: %v", sock, err)}, nil
		case !ok:
			return verdict{why: why + "; " + containerdError(out.String())}, nil
		}
		return verdict{accepted: true}, nil
	}
}

// criVersion asks the CRI runtime service at sock for its version. ok is
// false when containerd answers without CRI (the plugin failed to load);
// err is set when it does not answer yet.
func criVersion(ctx context.Context, sock string) (ok bool, why string, err error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false, "", err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if status.Code(err) == codes.Unimplemented {
		return false, "containerd serves no CRI runtime service", nil
	}
	if err != nil {
		return false, "", err
	}
	return true, "", nil
}

// containerdError is the line of containerd's log that says why it
// refused: the last error or fatal line.
func containerdError(log string) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "level=fatal") || strings.Contains(lines[i], "failed to load plugin") || strings.HasPrefix(lines[i], "containerd: ") {
			return lines[i]
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		// CNI's config is installed later, by the cluster's DaemonSet.
		if strings.Contains(lines[i], "level=error") && !strings.Contains(lines[i], "failed to load cni") {
			return lines[i]
		}
	}
	return lines[len(lines)-1]
}
