//go:build components && e2e

package imagespec

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/berth-node/berth/internal/safe"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"
)

// e2eCommandsFile is the image-fidelity table: for each e2e image, the
// commands Kubernetes' e2e suite runs in it, each row citing where.
const e2eCommandsFile = "testdata/e2e-commands.yaml"

// e2eCommand is one row of e2eCommandsFile: a command run in an image
// unpacked on the builder, chrooted into it as root (or User), as the
// suite's pod runs it, and what must come of it. ${NAME} in argv, env,
// files, get and the patterns is one of e2eVars' names.
type e2eCommand struct {
	// Image is the repository's last element (agnhost): the row runs in
	// every tag of it the build makes.
	Image string `json:"image"`
	Name  string `json:"name"`
	// Source is where the command comes from: a file of the
	// k8s.io/kubernetes module (checked to exist at the suite's version)
	// and the function or spec, or the image's upstream definition.
	Source string   `json:"source"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	// User is the numeric uid to run as: the image's, or the spec's.
	User string `json:"user,omitempty"`
	// Files are written into the image's root first: what the kubelet
	// or the pod's volumes provide (resolv.conf, a ConfigMap's Corefile)
	// or a stand-in for the node's kernel's file.
	Files map[string]string `json:"files,omitempty"`
	// Netns runs the row in a network namespace of its own with lo up,
	// as a pod has: for servers on fixed ports (DNS on 53, nginx on 80).
	Netns bool `json:"netns,omitempty"`
	// HostProc bind-mounts the builder's /proc at /rootfs/proc, as the
	// host-exec pods' hostPath volume of / puts the node's there.
	HostProc bool `json:"hostProc,omitempty"`
	// Background is started first and must keep running; the row
	// retries its command until it succeeds (60 s at most).
	Background *e2eBackground `json:"background,omitempty"`
	// Get is an HTTP GET the test makes (in the row's namespace) instead
	// of running a command; Stdout matches the body.
	Get string `json:"get,omitempty"`
	// Dial is a TCP connection the test opens and closes instead.
	Dial string `json:"dial,omitempty"`
	// KeepsRunning: the command must still run 2 s after it started
	// (a pod's long-running command); it is then killed.
	KeepsRunning bool `json:"keepsRunning,omitempty"`
	// Exit is the exit status the command must have.
	Exit int `json:"exit,omitempty"`
	// Stdout and Stderr are regular expressions their output must match.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// UDP is what the test's UDP server at ${UDP_PORT} must have received.
	UDP string `json:"udp,omitempty"`
}

// e2eBackground is a server the row's command talks to, in the same
// image and namespaces; Log must match its output by the row's end.
type e2eBackground struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Log  string   `json:"log,omitempty"`
}

// e2eVars are the names a row may use: the test's HTTP server on
// 127.0.0.1 (which answers every path with HTTP_BODY), a TCP listener on
// [::1] (ss -46, as the suite runs it, lists IPv6 sockets only), its UDP
// server's
// port on 127.0.0.1, a free UDP port for a client's source port, and the
// process standing for the node's PID 1 in host-exec rows, one the test
// starts (the builder's own PID 1 may be out of reach, a container's
// init in another user namespace), with its mount namespace (readlink
// /proc/PID/ns/mnt).
var e2eVars = []string{"HTTP", "HTTP_PORT", "HTTP_BODY", "LISTEN6_PORT", "UDP_PORT", "UDP_SRC_PORT", "NODE_PID", "NODE_MNTNS"}

func loadE2ECommands(t *testing.T) []e2eCommand {
	t.Helper()
	b, err := os.ReadFile(e2eCommandsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []e2eCommand
	if err := yaml.UnmarshalStrict(b, &rows); err != nil {
		t.Fatalf("%s: %v", e2eCommandsFile, err)
	}
	seen := map[string]bool{}
	for i, r := range rows {
		where := fmt.Sprintf("%s: row %d (%s %q)", e2eCommandsFile, i, r.Image, r.Name)
		actions := 0
		for _, set := range []bool{len(r.Argv) > 0, r.Get != "", r.Dial != ""} {
			if set {
				actions++
			}
		}
		switch {
		case r.Image == "" || r.Name == "" || r.Source == "":
			t.Errorf("%s: image, name and source are required", where)
		case actions != 1:
			t.Errorf("%s: want exactly one of argv, get and dial", where)
		case r.KeepsRunning && (len(r.Argv) == 0 || r.Background != nil):
			t.Errorf("%s: keepsRunning is for a command with no background", where)
		case seen[r.Image+"/"+r.Name]:
			t.Errorf("%s: a second row of that name", where)
		}
		seen[r.Image+"/"+r.Name] = true
		for _, p := range []string{r.Stdout, r.Stderr} {
			if _, err := regexp.Compile(expandE2E(p, nil, true)); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
		for _, m := range e2eVarRef.FindAllStringSubmatch(r.text(), -1) {
			if !slices.Contains(e2eVars, m[1]) {
				t.Errorf("%s: ${%s} is not one of %s", where, m[1], e2eVars)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return rows
}

// text is every string of the row that may hold ${NAME}.
func (r e2eCommand) text() string {
	all := append(append([]string{r.Get, r.Dial, r.Stdout, r.Stderr, r.UDP}, r.Argv...), r.Env...)
	for k, c := range r.Files {
		all = append(all, k, c)
	}
	if r.Background != nil {
		all = append(append(append(all, r.Background.Argv...), r.Background.Env...), r.Background.Log)
	}
	return strings.Join(all, "\n")
}

// e2eVarRef is ${NAME}; a shell's other $ forms ($(...), $?, $2) are
// left to the shell.
var e2eVarRef = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)

// expandE2E replaces ${NAME} by vars[NAME] (by "" when vars is nil, to
// check a pattern compiles), quoted for a regexp when quote is set.
func expandE2E(s string, vars map[string]string, quote bool) string {
	return e2eVarRef.ReplaceAllStringFunc(s, func(ref string) string {
		v := vars[ref[2:len(ref)-1]]
		if quote {
			return regexp.QuoteMeta(v)
		}
		return v
	})
}

// TestE2ECommandsCiteTheSuite checks that every row citing a file of the
// k8s.io/kubernetes module names one that exists at the version the
// suite is built from (components/e2e's requirement).
func TestE2ECommandsCiteTheSuite(t *testing.T) {
	rows := loadE2ECommands(t)
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join("..", "..", "..", "components", "e2e")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m k8s.io/kubernetes in components/e2e: %v (%q): make e2e downloads the module", err, out)
	}
	cited := 0
	for _, r := range rows {
		f, ok := strings.CutPrefix(strings.Fields(r.Source)[0], "k8s.io/kubernetes/")
		if !ok {
			continue
		}
		cited++
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s %q cites %s, which k8s.io/kubernetes at %s does not have", r.Image, r.Name, f, dir)
		}
	}
	if cited == 0 {
		t.Errorf("%s: no row cites a file of k8s.io/kubernetes", e2eCommandsFile)
	}
}

// TestE2EImageCommands runs, in each e2e image the build makes, the
// commands the suite runs in it (testdata/e2e-commands.yaml): each image
// is unpacked into a directory and the commands run chrooted there as
// root, against servers the test starts. A program missing, crashing
// (agnhost's wget once segfaulted on -T) or answering otherwise than the
// suite reads it fails here rather than as a spec's timeout.
func TestE2EImageCommands(t *testing.T) {
	e := getE2EEnv(t)
	if e.arch != "amd64" {
		t.Fatalf("BERTH_ARCH %s: this test runs the images' programs on the builder, an amd64 machine", e.arch)
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test chroots into the images and makes namespaces: run make test-e2e-images as root (CI does)")
	}
	rows := loadE2ECommands(t)
	byImage := map[string][]e2eCommand{}
	for _, r := range rows {
		byImage[r.Image] = append(byImage[r.Image], r)
	}
	vars := e2eServers(t)
	built := map[string]bool{}
	for _, ref := range e.refs {
		repo, tag, _ := strings.Cut(path.Base(ref), ":")
		built[repo] = true
		t.Run(repo+":"+tag, func(t *testing.T) {
			if len(byImage[repo]) == 0 {
				t.Fatalf("%s has no row in %s: add the commands the suite runs in it", ref, e2eCommandsFile)
			}
			img := readTarball(t, filepath.Join(e.imagesDir, repo+"-"+tag+".tar"))
			root := unpackImage(t, img)
			for _, r := range byImage[repo] {
				t.Run(r.Name, func(t *testing.T) { runE2ECommand(t, img, root, r, vars) })
			}
		})
	}
	for repo := range byImage {
		if !built[repo] {
			t.Errorf("%s has rows for %s, which the build does not make (BERTH_E2E_IMAGE_REFS)", e2eCommandsFile, repo)
		}
	}
}

// e2eServers starts the servers rows talk to on the builder's loopback
// and returns e2eVars' values (UDP's are per row).
func e2eServers(t *testing.T) map[string]string {
	t.Helper()
	const body = "hello from the image-fidelity test"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	}), ReadHeaderTimeout: 10 * time.Second}
	goSafe("e2e http server", func() { _ = srv.Serve(l) }, nil)
	t.Cleanup(func() { _ = srv.Close() })
	// The node's PID 1 stands in a process of the builder's own: not the
	// test's, whose main thread may be the one a row's namespaces were
	// made on.
	node := exec.Command("sleep", "3600")
	if err := node.Start(); err != nil {
		t.Fatalf("starting the process standing for the node's PID 1: %v", err)
	}
	t.Cleanup(func() {
		_ = node.Process.Kill()
		_ = node.Wait()
	})
	pid := strconv.Itoa(node.Process.Pid)
	mntns, err := os.Readlink("/proc/" + pid + "/ns/mnt")
	if err != nil {
		t.Fatalf("reading the mount namespace of the process standing for the node's PID 1: %v", err)
	}
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatalf("listening on [::1] (the builder needs IPv6 loopback for the ss row): %v", err)
	}
	t.Cleanup(func() { _ = l6.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_, port6, _ := net.SplitHostPort(l6.Addr().String())
	return map[string]string{"HTTP": l.Addr().String(), "HTTP_PORT": port, "HTTP_BODY": body, "LISTEN6_PORT": port6,
		"NODE_PID": pid, "NODE_MNTNS": mntns}
}

// unpackImage writes the image's one layer into a directory as a
// runtime would: owners, modes (set-user-ID included) and links kept,
// and /dev's null, zero and urandom made, which the runtime mounts.
func unpackImage(t *testing.T, img builtImage) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(img.entries))
	for p := range img.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		h := img.entries[p]
		dst := filepath.Join(root, filepath.FromSlash(path.Clean("/"+p)))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = os.WriteFile(dst, img.data[p], 0o600)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, dst)
		case tar.TypeLink:
			err = os.Link(filepath.Join(root, filepath.FromSlash(path.Clean("/"+h.Linkname))), dst)
		default:
			err = fmt.Errorf("type %c", h.Typeflag)
		}
		if err != nil {
			t.Fatalf("%s: unpacking %s: %v", img.name, p, err)
		}
		if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeDir {
			if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
			// chmod(2)'s bits, set-user-ID included (after chown, which clears it).
			if err := syscall.Chmod(dst, uint32(h.Mode&0o7777)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, minor := range map[string]int{"null": 3, "zero": 5, "urandom": 9} {
		p := filepath.Join(root, "dev", name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, uint32(minor)))); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatalf("making /dev/%s in the image's root: %v", name, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// runE2ECommand runs one row and checks its outcome.
func runE2ECommand(t *testing.T, img builtImage, root string, r e2eCommand, base map[string]string) {
	vars := map[string]string{}
	for k, v := range base {
		vars[k] = v
	}
	var udp *udpServer
	if strings.Contains(r.text(), "${UDP") {
		udp = startUDPServer(t)
		_, vars["UDP_PORT"], _ = net.SplitHostPort(udp.addr)
		vars["UDP_SRC_PORT"] = freeUDPPort(t)
	}
	for name, content := range r.Files {
		p := filepath.Join(root, filepath.FromSlash(path.Clean("/"+name)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(expandE2E(content, vars, false)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := inNamespaces(r, root, func() error { return runE2ERow(img, root, r, vars, udp) })
	if err != nil {
		t.Errorf("%s (from %s): %v", describeRow(r), r.Source, err)
	}
}

func describeRow(r e2eCommand) string {
	switch {
	case r.Get != "":
		return "GET " + r.Get
	case r.Dial != "":
		return "dial " + r.Dial
	}
	return fmt.Sprintf("%q", r.Argv)
}

// runE2ERow is the row's work, in its namespaces.
func runE2ERow(img builtImage, root string, r e2eCommand, vars map[string]string, udp *udpServer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var bg *exec.Cmd
	var bgOut lockedBuffer
	if r.Background != nil {
		var err error
		bg, err = imageCommand(ctx, img, root, expandAll(r.Background.Argv, vars), expandAll(r.Background.Env, vars), r.User)
		if err != nil {
			return fmt.Errorf("background: %w", err)
		}
		bg.Stdout, bg.Stderr = &bgOut, &bgOut
		if err := bg.Start(); err != nil {
			return fmt.Errorf("starting background %q: %w", r.Background.Argv, err)
		}
		exited := make(chan error, 1)
		goSafe("background row wait", func() { exited <- bg.Wait() }, func(p *safe.Panic) { exited <- p })
		defer func() {
			_ = bg.Process.Kill()
			<-exited
		}()
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := attemptE2E(ctx, img, root, r, vars, udp)
			if err == nil && r.Background.Log != "" {
				if re := regexp.MustCompile(expandE2E(r.Background.Log, vars, true)); !re.MatchString(bgOut.String()) {
					err = fmt.Errorf("background %q has not logged %q", r.Background.Argv, re)
				}
			}
			select {
			case werr := <-exited:
				exited <- werr
				return fmt.Errorf("background %q exited (%v); its output:\n%s", r.Background.Argv, werr, bgOut.String())
			default:
			}
			if err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w (still after 60 s); background's output:\n%s", err, bgOut.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return attemptE2E(ctx, img, root, r, vars, udp)
}

// attemptE2E runs the row's command (or GET, or dial) once.
func attemptE2E(ctx context.Context, img builtImage, root string, r e2eCommand, vars map[string]string, udp *udpServer) error {
	var stdout, stderr []byte
	switch {
	case r.Get != "":
		var err error
		if stdout, err = getHere(ctx, expandE2E(r.Get, vars, false)); err != nil {
			return err
		}
	case r.Dial != "":
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", expandE2E(r.Dial, vars, false))
		if err != nil {
			return err
		}
		// Held a moment: the boom server answers the handshake's last ACK.
		time.Sleep(200 * time.Millisecond)
		_ = c.Close()
	default:
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd, err := imageCommand(cctx, img, root, expandAll(r.Argv, vars), expandAll(r.Env, vars), r.User)
		if err != nil {
			return err
		}
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if r.KeepsRunning {
			return keepsRunning(cmd, &so, &se)
		}
		err = cmd.Run()
		stdout, stderr = so.Bytes(), se.Bytes()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.Exited():
			code = ee.ExitCode()
		case err != nil:
			return fmt.Errorf("%w (a crash or a timeout); stdout %q, stderr %q", err, stdout, stderr)
		}
		if code != r.Exit {
			return fmt.Errorf("exit status %d, want %d; stdout %q, stderr %q", code, r.Exit, stdout, stderr)
		}
	}
	for _, m := range []struct {
		name, pattern string
		got           []byte
	}{{"stdout", r.Stdout, stdout}, {"stderr", r.Stderr, stderr}} {
		if m.pattern == "" {
			continue
		}
		if re := regexp.MustCompile(expandE2E(m.pattern, vars, true)); !re.Match(m.got) {
			return fmt.Errorf("%s %q does not match %q (stderr %q)", m.name, m.got, re, stderr)
		}
	}
	if r.UDP != "" {
		if got := udp.received(); !strings.Contains(got, expandE2E(r.UDP, vars, false)) {
			return fmt.Errorf("the UDP server received %q, want %q", got, r.UDP)
		}
	}
	return nil
}

// getHere is an HTTP GET of url's body from the calling goroutine's
// thread (its network namespace: net/http's Transport would dial from
// another goroutine, on any thread).
func getHere(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", req.URL.Host)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req.Close = true
	if err := req.Write(c); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s, body %q", url, resp.Status, body)
	}
	return body, nil
}

// keepsRunning starts cmd and checks it is still running 2 s later.
func keepsRunning(cmd *exec.Cmd, stdout, stderr *bytes.Buffer) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	goSafe("row wait", func() { done <- cmd.Wait() }, func(p *safe.Panic) { done <- p })
	select {
	case err := <-done:
		return fmt.Errorf("exited within 2 s (%v); stdout %q, stderr %q", err, stdout, stderr)
	case <-time.After(2 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-done
	return nil
}

func expandAll(list []string, vars map[string]string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = expandE2E(s, vars, false)
	}
	return out
}

// imageCommand is argv run chrooted in the image's root, with its
// config's environment and env, as root or uid user: a bare program name
// is found along the image's PATH, as the runtime finds it.
func imageCommand(ctx context.Context, img builtImage, root string, argv, env []string, user string) (*exec.Cmd, error) {
	rc := img.config.Config
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		prog = ""
		for _, kv := range rc.Env {
			if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
				for _, d := range strings.Split(dirs, ":") {
					if _, ok := img.entries[path.Join(d, argv[0])]; ok {
						prog = path.Join(d, argv[0])
						break
					}
				}
			}
		}
		if prog == "" {
			return nil, fmt.Errorf("%s: executable file not found in the image's $PATH", argv[0])
		}
	}
	cmd := exec.CommandContext(ctx, prog)
	cmd.Args = argv
	cmd.Env = append(append([]string{}, rc.Env...), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	if user != "" {
		var uid uint32
		if _, err := fmt.Sscanf(user, "%d", &uid); err != nil {
			return nil, fmt.Errorf("user %q: want a numeric uid", user)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// inNamespaces runs f on a thread of its own in the namespaces the row
// asks for: a new network namespace with lo up (Netns), and a new mount
// namespace with the builder's /proc at root/rootfs/proc (HostProc). What f starts or dials there is in them.
// The thread is never handed back to the runtime, so it ends with f and
// no other goroutine runs in its namespaces.
func inNamespaces(r e2eCommand, root string, f func() error) error {
	netns, mounts := r.Netns, r.HostProc
	if !netns && !mounts {
		return f()
	}
	errc := make(chan error, 1)
	goSafe("namespaced row", func() {
		runtime.LockOSThread()
		errc <- func() error {
			flags := 0
			if netns {
				flags |= unix.CLONE_NEWNET
			}
			if mounts {
				flags |= unix.CLONE_NEWNS
			}
			if err := unix.Unshare(flags); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if netns {
				if err := loopbackUp(); err != nil {
					return err
				}
			}
			if mounts {
				if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
					return fmt.Errorf("making / private in the test's mount namespace: %w", err)
				}
				p := filepath.Join(root, "rootfs", "proc")
				if err := os.MkdirAll(p, 0o755); err != nil {
					return err
				}
				if err := unix.Mount("/proc", p, "", unix.MS_BIND, ""); err != nil {
					return fmt.Errorf("binding /proc at %s: %w", p, err)
				}
			}
			return f()
		}()
	}, func(p *safe.Panic) { errc <- p })
	return <-errc
}

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return nil
}

// udpServer records what reaches it on the builder's loopback.
type udpServer struct {
	addr string
	mu   sync.Mutex
	got  bytes.Buffer
}

func (u *udpServer) received() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got.String()
}

func startUDPServer(t *testing.T) *udpServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	u := &udpServer{addr: pc.LocalAddr().String()}
	goSafe("udp server", func() {
		buf := make([]byte, 65536)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			u.mu.Lock()
			u.got.Write(buf[:n])
			u.mu.Unlock()
		}
	}, nil)
	return u
}

// freeUDPPort is a UDP port free a moment ago, for a client's -p.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	return port
}

// lockedBuffer is a background program's output, read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// goSafe starts fn through the project's recovering helper: a panic is
// logged with its stack and handed to onPanic (which must unblock
// whoever waits on fn), not the end of the test binary.
func goSafe(name string, fn func(), onPanic func(*safe.Panic)) {
	safe.Go(slog.Default(), name, fn, onPanic)
}
