//go:build components && e2e

// These tests need make e2e, e2e-images and e2e-repo-list, which make test
// does not build, so they carry their own tag beside components: the
// cluster-image tests run without them (make test-components-images).

package imagespec

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/image/elfarch"
	"github.com/berth-node/berth/image/oci/e2erepo"
)

// e2eLocalRegistry is the registry stand-in's host, as the repo-list file
// components.mk writes names it.
const e2eLocalRegistry = "registry.berth.test"

// e2eEnv is what make test-e2e-images passes.
type e2eEnv struct {
	e2eDir, imagesDir, repoList, arch string
	refs                              []string
}

func getE2EEnv(t *testing.T) e2eEnv {
	t.Helper()
	e := e2eEnv{
		e2eDir: os.Getenv("BERTH_E2E_DIR"), imagesDir: os.Getenv("BERTH_E2E_IMAGES_DIR"),
		repoList: os.Getenv("BERTH_E2E_REPO_LIST"), arch: os.Getenv("BERTH_ARCH"),
		refs: strings.Fields(os.Getenv("BERTH_E2E_IMAGE_REFS")),
	}
	if e.e2eDir == "" || e.imagesDir == "" || e.repoList == "" || e.arch == "" || len(e.refs) == 0 {
		t.Fatal("BERTH_E2E_DIR, BERTH_E2E_IMAGES_DIR, BERTH_E2E_REPO_LIST, BERTH_E2E_IMAGE_REFS or BERTH_ARCH is unset: run make test-e2e-images")
	}
	return e
}

// listImages runs e2e.test --list-images, with repoList as
// KUBE_TEST_REPO_LIST when it is not empty, and returns what it prints.
func listImages(t *testing.T, e2eDir, repoList string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e2eDir, "e2e.test"), "--list-images")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "KUBE_TEST_REPO_LIST=") || strings.HasPrefix(kv, "KUBE_TEST_REPO=")
	})
	if repoList != "" {
		cmd.Env = append(cmd.Env, "KUBE_TEST_REPO_LIST="+repoList)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("e2e.test --list-images (KUBE_TEST_REPO_LIST=%q): %v\n%s", repoList, err, stderr.Bytes())
	}
	imgs := strings.Fields(string(out))
	if len(imgs) < 20 {
		t.Fatalf("e2e.test --list-images printed %d images, want the suite's whole list:\n%s", len(imgs), out)
	}
	sort.Strings(imgs)
	return imgs
}

// upstreamImage is how an e2e image starts upstream, from its Dockerfile
// and base image (test/images/<name>/ of k8s.io/kubernetes v1.35.4), and
// files the suite's specs use in it.
type upstreamImage struct {
	entrypoint, cmd []string
	user            string
	files           []string
	// command is the program the specs' pods run in an image that names
	// none (etcd's), checked as the entrypoint is elsewhere.
	command string
}

// upstreamRun is each e2e image's upstreamImage, by repository name.
func upstreamRun() map[string]upstreamImage {
	return map[string]upstreamImage{
		"agnhost": {[]string{"/agnhost"}, []string{"pause"}, "",
			[]string{"/agnhost-2", "/localhost.crt", "/localhost.key", "/bin/sh", "/bin/bash", "/usr/bin/curl",
				"/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/getent", "/usr/bin/nc", "/sbin/ip", "/usr/bin/ss", "/usr/bin/iperf", "/usr/local/bin/iperf",
				"/coredns", "/bin/nsenter", "/bin/wget", "/var/registry/pause/manifests/testing"}, ""},
		"busybox":         {nil, []string{"sh"}, "", []string{"/bin/sh", "/bin/ls", "/bin/wget", "/bin/nslookup", "/bin/sleep", "/bin/cat"}, ""},
		"nginx":           {[]string{"/docker-entrypoint.sh"}, []string{"nginx", "-g", "daemon off;"}, "", []string{"/usr/sbin/nginx", "/etc/nginx/nginx.conf", "/etc/nginx/mime.types", "/bin/sh"}, ""},
		"pause":           {[]string{"/pause"}, nil, "65535:65535", nil, ""},
		"nonroot":         {nil, []string{"/bin/sh"}, "1234", []string{"/bin/id"}, ""},
		"nonewprivs":      {nil, []string{"nnp"}, "", []string{"/usr/local/bin/nnp"}, ""},
		"kitten":          {[]string{"/agnhost"}, []string{"test-webserver"}, "", []string{"/kitten.jpg", "/data.json"}, ""},
		"nautilus":        {[]string{"/agnhost"}, []string{"test-webserver"}, "", []string{"/nautilus.jpg", "/data.json"}, ""},
		"ipc-utils":       {nil, []string{"/bin/sh"}, "", []string{"/usr/bin/ipcs", "/usr/bin/ipcmk", "/usr/bin/ipcrm"}, ""},
		"jessie-dnsutils": {nil, []string{"bash"}, "", []string{"/bin/bash", "/usr/bin/dig", "/usr/bin/host", "/usr/bin/nslookup", "/usr/bin/getent"}, ""},
		// The aggregator specs' pair (test/images/sample-apiserver;
		// cluster/images/etcd on distroless/static, whose user is 0).
		"sample-apiserver": {[]string{"/sample-apiserver"}, nil, "", []string{"/bin/sh"}, ""},
		"etcd":             {nil, nil, "0", []string{"/usr/local/bin/etcdctl", "/usr/local/bin/etcdutl"}, "/usr/local/bin/etcd"},
		// test/images/regression-issue-74839 on debian-base.
		"regression-issue-74839": {[]string{"/regression-issue-74839"}, nil, "", []string{"/bin/sh"}, ""},
		// kubernetes/release's distroless-iptables: FROM scratch, so no
		// program and no user; the KubeProxy spec's pod runs sleep 600.
		"distroless-iptables": {nil, nil, "", []string{"/bin/sh", "/bin/cat", "/bin/grep", "/usr/sbin/iptables",
			"/usr/sbin/iptables-save", "/usr/sbin/iptables-restore", "/usr/sbin/ip6tables", "/usr/sbin/iptables-legacy",
			"/usr/sbin/ipset", "/usr/sbin/nft", "/sbin/modprobe"}, "/bin/sleep"},
	}
}

// TestE2EImages opens each e2e image tarball and checks what the suite
// needs of it: the upstream name, the image's architecture and every ELF
// file's machine, how upstream's starts (entrypoint, cmd, user) with the
// program it starts in the image, and the files the specs use.
func TestE2EImages(t *testing.T) {
	e := getE2EEnv(t)
	want, ok := elfarch.Machine(e.arch)
	if !ok {
		t.Fatalf("BERTH_ARCH %q: want one of %s", e.arch, elfarch.Names)
	}
	ups := upstreamRun()
	for _, ref := range e.refs {
		repo, tag, _ := strings.Cut(path.Base(ref), ":")
		t.Run(repo+":"+tag, func(t *testing.T) {
			up, ok := ups[repo]
			if !ok {
				t.Fatalf("%s: no upstream entrypoint recorded for %s in upstreamRun", ref, repo)
			}
			img := readTarball(t, filepath.Join(e.imagesDir, repo+"-"+tag+".tar"))
			if img.name != ref {
				t.Errorf("tarball names itself %q, want %q", img.name, ref)
			}
			if a := img.man.Annotations; a["org.opencontainers.image.title"] != repo || a["org.opencontainers.image.version"] != tag {
				t.Errorf("annotations %v, want title %s and version %s", a, repo, tag)
			}
			if img.config.Architecture != e.arch || img.config.OS != "linux" {
				t.Errorf("config is for %s/%s, want linux/%s", img.config.OS, img.config.Architecture, e.arch)
			}
			rc := img.config.Config
			if !slices.Equal(rc.Entrypoint, up.entrypoint) || !slices.Equal(rc.Cmd, up.cmd) || rc.User != up.user {
				t.Errorf("entrypoint %q cmd %q user %q, want upstream's %q %q %q", rc.Entrypoint, rc.Cmd, rc.User, up.entrypoint, up.cmd, up.user)
			}
			words := rc.Cmd
			if len(rc.Entrypoint) == 0 && len(rc.Cmd) == 0 && up.command != "" {
				words = []string{up.command}
			}
			prog := e2eProgram(t, img, rc.Entrypoint, words, rc.Env)
			if h := img.entries[prog]; h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 ||
				!(bytes.HasPrefix(img.data[prog], []byte("\x7fELF")) || bytes.HasPrefix(img.data[prog], []byte("#!/bin/sh\n"))) {
				t.Errorf("program %s: type %c mode %o, want an executable ELF file or sh script", prog, h.Typeflag, h.Mode)
			}
			for p, h := range img.entries {
				if h.Typeflag == tar.TypeReg {
					if err := elfarch.Check(p, img.data[p], want); err != nil {
						t.Error(err)
					}
				}
			}
			for _, f := range up.files {
				if p := img.resolve(t, f); img.entries[p].Typeflag != tar.TypeReg {
					t.Errorf("%s resolves to %s, no regular file", f, p)
				}
			}
			// Debian's busybox sh runs its applets before PATH: where the
			// image carries real nc, ip or nslookup, sh must be bash.
			if _, real := img.entries["/usr/bin/nslookup"]; real {
				if p := img.resolve(t, "/bin/sh"); p != "/bin/bash" {
					t.Errorf("/bin/sh resolves to %s, want /bin/bash: a busybox sh would run its own nslookup, nc and ip", p)
				}
			}
		})
	}
	// fake-registry-server answers pause:testing with the index its tag
	// file names (the private-registry specs pull it).
	for _, ref := range e.refs {
		if repo, tag, _ := strings.Cut(path.Base(ref), ":"); repo == "agnhost" {
			img := readTarball(t, filepath.Join(e.imagesDir, repo+"-"+tag+".tar"))
			d := strings.TrimSpace(string(img.data["/var/registry/pause/manifests/testing"]))
			if h := img.entries["/var/registry/pause/manifests/"+d]; d == "" || h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o004 == 0 {
				t.Errorf("%s: /var/registry/pause/manifests/testing names %q, which is no file all may read in the image", ref, d)
			}
		}
	}
	// nnp must run as root whoever starts it: the no-new-privileges specs
	// read whether the set-user-ID bit took.
	if slices.Contains(e.refs, "registry.k8s.io/e2e-test-images/nonewprivs:1.3") {
		img := readTarball(t, filepath.Join(e.imagesDir, "nonewprivs-1.3.tar"))
		if h := img.entries["/usr/local/bin/nnp"]; h == nil || h.Mode&0o4000 == 0 || h.Uid != 0 {
			t.Errorf("/usr/local/bin/nnp: %+v, want set-user-ID root", h)
		}
	}
}

// e2eProgram is the file the runtime execs: the entrypoint's first word,
// or the cmd's, a bare name found along the config's PATH.
func e2eProgram(t *testing.T, img builtImage, entrypoint, cmd, env []string) string {
	t.Helper()
	words := entrypoint
	if len(words) == 0 {
		words = cmd
	}
	if len(words) == 0 {
		t.Fatal("no entrypoint and no cmd")
	}
	if strings.Contains(words[0], "/") {
		return img.resolve(t, words[0])
	}
	for _, kv := range env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range strings.Split(dirs, ":") {
				if _, ok := img.entries[path.Join(d, words[0])]; ok {
					return img.resolve(t, path.Join(d, words[0]))
				}
			}
		}
	}
	t.Fatalf("%s is on no PATH of %q", words[0], env)
	return ""
}

// TestE2EImagesListed checks the built images' names against e2e.test's
// own list: a KUBE_VERSION whose suite moved a tag fails here, by name.
func TestE2EImagesListed(t *testing.T) {
	e := getE2EEnv(t)
	listed := listImages(t, e.e2eDir, "")
	for _, ref := range e.refs {
		if _, found := slices.BinarySearch(listed, ref); !found {
			t.Errorf("%s is built but e2e.test --list-images does not list it: update E2E_IMAGE_REFS and the spec to the suite's tag", ref)
		}
	}
}

// TestE2ERepoList checks the KUBE_TEST_REPO_LIST file components.mk wrote:
// it has every RegistryList key, and with it e2e.test names every image it
// uses under the registry stand-in, each as e2erepo.LocalRef names its
// upstream one, so the stand-in serves each built image under that name.
// The CSI drivers' images, which e2e.test reads from its embedded manifests,
// are listed unmapped: the suite maps them when it deploys the manifests
// (ReplaceRegistryInImageURL, by the registry before the image's last /),
// so each must be in one of the list's registries exactly.
func TestE2ERepoList(t *testing.T) {
	e := getE2EEnv(t)
	b, err := os.ReadFile(e.repoList)
	if err != nil {
		t.Fatalf("reading the repo-list file (make e2e-repo-list): %v", err)
	}
	var m map[string]string
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", e.repoList, err)
	}
	for _, k := range e2erepo.Keys() {
		if !strings.HasPrefix(m[k], e2eLocalRegistry+"/") {
			t.Errorf("%s: %s is %q, want a registry under %s", e.repoList, k, m[k], e2eLocalRegistry)
		}
	}
	upstream := listImages(t, e.e2eDir, "")
	local := listImages(t, e.e2eDir, e.repoList)
	mapped, atUse := 0, 0
	for _, u := range upstream {
		l, err := e2erepo.LocalRef(e2eLocalRegistry, u)
		if err != nil {
			t.Errorf("e2e.test lists %s: %v", u, err)
			continue
		}
		if _, found := slices.BinarySearch(local, l); found {
			mapped++
			continue
		}
		name, _, _ := strings.Cut(u, ":")
		if _, found := slices.BinarySearch(local, u); found && slices.Contains(e2erepo.Registries(), path.Dir(name)) {
			atUse++
			continue
		}
		t.Errorf("with %s, e2e.test names %s neither %s nor as itself in a registry it maps at use", e.repoList, u, l)
	}
	if len(local) != len(upstream) {
		t.Errorf("e2e.test lists %d images with the repo list, %d without", len(local), len(upstream))
	}
	t.Logf("%d images mapped by the list, %d mapped when their manifests are deployed", mapped, atUse)
	for _, ref := range e.refs {
		l, err := e2erepo.LocalRef(e2eLocalRegistry, ref)
		if _, found := slices.BinarySearch(local, l); err != nil || !found {
			t.Errorf("built image %s: LocalRef %q (%v) is not among the names e2e.test pulls with the repo list", ref, l, err)
		}
	}
}

// TestE2EBusybox runs the busybox image's own busybox (on an amd64
// builder) for what the suite's specs read of it: every applet the binary
// has is linked in /bin, as in the library image, and nothing else; sh
// is busybox's ash; ash passes environment variables whose names are not
// shell names on to what it runs (the envFrom specs' `sh -c env`); and a
// write to a read-only file system fails with ash's own message (the
// read-only busybox spec compares it).
func TestE2EBusybox(t *testing.T) {
	e := getE2EEnv(t)
	const ref = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
	if !slices.Contains(e.refs, ref) {
		t.Fatalf("%s is not among the e2e images (BERTH_E2E_IMAGE_REFS)", ref)
	}
	if e.arch != "amd64" {
		t.Fatalf("BERTH_ARCH %s: this test runs the image's busybox on the builder, an amd64 machine", e.arch)
	}
	img := readTarball(t, filepath.Join(e.imagesDir, "busybox-1.37.0-1.tar"))
	bin := filepath.Join(t.TempDir(), "busybox")
	if err := os.WriteFile(bin, img.data["/bin/busybox"], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	want := strings.Fields(string(out))
	var linked []string
	for p, h := range img.entries {
		if h.Typeflag == tar.TypeSymlink && h.Linkname == "busybox" && path.Dir(p) == "/bin" {
			linked = append(linked, path.Base(p))
		}
	}
	sort.Strings(want)
	sort.Strings(linked)
	if !slices.Equal(linked, want) {
		var missing, extra []string
		for _, a := range want {
			if !slices.Contains(linked, a) {
				missing = append(missing, a)
			}
		}
		for _, a := range linked {
			if !slices.Contains(want, a) {
				extra = append(extra, a)
			}
		}
		t.Errorf("/bin's links to busybox: %d, its applets: %d; not linked: %q; linked, no applet: %q", len(linked), len(want), missing, extra)
	}
	if p := img.resolve(t, "/bin/sh"); p != "/bin/busybox" {
		t.Errorf("/bin/sh resolves to %s, want /bin/busybox (ash)", p)
	}
	cmd := exec.Command(bin, "sh", "-c", "env")
	cmd.Env = []string{"data-1=value-1", "PATH=/bin"}
	if got, err := cmd.Output(); err != nil || !strings.Contains(string(got), "data-1=value-1\n") {
		t.Errorf("sh -c env with data-1 in its environment: %v, printed %q; want data-1=value-1 passed on", err, got)
	}
	// ash's message for a file it cannot create, as the spec expects it
	// ("/bin/sh: can't create /file: Read-only file system"), here for a
	// directory it may not write.
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// root writes anywhere: a file under a regular file fails for all.
		dir = bin
	}
	b, _ := exec.Command(bin, "sh", "-c", "echo test > "+dir+"/file").CombinedOutput()
	if !strings.HasPrefix(string(b), "sh: can't create "+dir+"/file: ") {
		t.Errorf("a write that fails printed %q, want ash's \"sh: can't create %s/file: ...\"", b, dir)
	}
}

// TestE2EAggregatorImages runs the aggregator specs' programs out of their
// images (on an amd64 builder) with the flags the spec gives them
// (test/e2e/apimachinery/aggregator.go): the etcd image's etcd serves on
// the client URL the spec names it, and sample-apiserver knows every flag
// the spec passes (started outside a cluster it only exits: it reads its
// clients' CA from the kube-apiserver it is aggregated into).
func TestE2EAggregatorImages(t *testing.T) {
	e := getE2EEnv(t)
	const etcdRef, sampleRef = "registry.k8s.io/etcd:3.6.6-0", "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"
	if !slices.Contains(e.refs, etcdRef) || !slices.Contains(e.refs, sampleRef) {
		t.Fatalf("%s or %s is not among the e2e images (BERTH_E2E_IMAGE_REFS)", etcdRef, sampleRef)
	}
	if e.arch != "amd64" {
		t.Fatalf("BERTH_ARCH %s: this test runs the images' programs on the builder, an amd64 machine", e.arch)
	}
	dir := t.TempDir()
	extract := func(tarball, file string) string {
		t.Helper()
		img := readTarball(t, filepath.Join(e.imagesDir, tarball))
		p := filepath.Join(dir, path.Base(file))
		if err := os.WriteFile(p, img.data[img.resolve(t, file)], 0o755); err != nil {
			t.Fatalf("copying %s out of %s: %v", file, tarball, err)
		}
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	sample := extract("sample-apiserver-1.29.2.tar", "/sample-apiserver")
	help, err := exec.CommandContext(ctx, sample, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("sample-apiserver --help: %v\n%s", err, help)
	}
	for _, flag := range []string{"--etcd-servers", "--tls-cert-file", "--tls-private-key-file", "--audit-log-path", "--audit-log-maxage", "--audit-log-maxbackup"} {
		if !strings.Contains(string(help), flag+" ") {
			t.Errorf("sample-apiserver --help lists no %s, which the aggregator spec passes", flag)
		}
	}

	etcd := extract("etcd-3.6.6-0.tar", "/usr/local/bin/etcd")
	if v, err := exec.CommandContext(ctx, etcd, "--version").Output(); err != nil || !strings.Contains(string(v), "etcd Version: 3.6.6\n") {
		t.Errorf("etcd --version: %v, printed %q; want 3.6.6", err, v)
	}
	client, peer := freeLoopbackURL(t), freeLoopbackURL(t)
	// The spec's command, on free ports: in its pod etcd has the pod's
	// own loopback; on the builder the peer port must be free too. No
	// --data-dir, as the spec: etcd keeps default.etcd in its directory.
	cmd := exec.CommandContext(ctx, etcd, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "default="+peer)
	cmd.Dir = dir
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the etcd image's etcd: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var health string
	for ctx.Err() == nil && !strings.Contains(health, `"health":"true"`) {
		time.Sleep(200 * time.Millisecond)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, client+"/health", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			health = string(b)
		}
	}
	if !strings.Contains(health, `"health":"true"`) {
		t.Errorf("etcd on %s: /health said %q within a minute; its log:\n%s", client, health, log.Bytes())
	}
}

// freeLoopbackURL is http://127.0.0.1:PORT for a port free a moment ago.
func freeLoopbackURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}
