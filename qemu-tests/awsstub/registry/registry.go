// Package registry is a minimal, read-only OCI distribution server for
// tests: the pull half of the distribution API (GET /v2/, manifests and
// blobs by tag or digest) over images loaded from OCI image-layout tarballs,
// the format image/oci writes. Every request needs HTTP Basic credentials,
// checked by a caller-supplied function (the ECR stand-in's issued tokens),
// so a successful pull proves the node fetched ECR credentials.
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-node/berth/image/oci"
	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
)

// maxBlob bounds one blob read from a tarball; test images are small.
const maxBlob = 1 << 30

// Config configures the registry.
type Config struct {
	// Realm is named in WWW-Authenticate.
	Realm string
	// Authorize checks Basic credentials; nil lets everyone in (a public
	// registry).
	Authorize func(username, password string) bool
	Logger    *slog.Logger
}

type blob struct {
	mediaType string
	data      []byte
}

// Server is the registry; it is an http.Handler.
type Server struct {
	cfg  Config
	log  *slog.Logger
	reqs serve.Log

	mu    sync.RWMutex
	blobs map[string]blob              // digest → content (manifests too)
	repos map[string]map[string]string // repository → tag → manifest digest
	owned map[string]map[string]bool   // repository → digests it may serve
}

// New returns an empty registry.
func New(cfg Config) *Server {
	if cfg.Realm == "" {
		cfg.Realm = "berth-test-registry"
	}
	return &Server{cfg: cfg, log: serve.Discard(cfg.Logger), blobs: map[string]blob{},
		repos: map[string]map[string]string{}, owned: map[string]map[string]bool{}}
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Start serves the registry over plain HTTP on addr.
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("registry", addr, s, nil, s.log)
}

// Image is what Load added.
type Image struct {
	Repository     string
	Tag            string
	ManifestDigest string
}

// nameRE is the distribution spec's repository name grammar.
var nameRE = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
var tagRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
var digestRE = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Load reads an OCI image-layout tarball and serves each image in its
// index.json under repository:tag. ref names the image ("demo:latest");
// when empty, the index's io.containerd.image.name annotation is used with
// its registry host dropped, so the name the node pulls
// (<host>/demo:latest) finds it. Every blob's digest is verified.
func (s *Server) Load(r io.Reader, ref string) ([]Image, error) {
	l, err := oci.ReadLayout(r, maxBlob)
	if err != nil {
		return nil, err
	}
	blobs := map[string]blob{}
	for d, data := range l.Blobs {
		blobs[d] = blob{mediaType: "application/octet-stream", data: data}
	}
	idx := l.Index
	if ref != "" && len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("image tarball has %d images; a ref names only one", len(idx.Manifests))
	}
	var out []Image
	owned := map[string][]string{}
	for i, desc := range idx.Manifests {
		name := ref
		if name == "" {
			name = dropHost(desc.Annotations[oci.AnnotationImageName])
		}
		repo, tag, err := splitRef(name)
		if err != nil {
			return nil, fmt.Errorf("image tarball index.json manifests[%d]: %w", i, err)
		}
		m, mb, _, err := l.Image(i)
		if err != nil {
			return nil, err
		}
		blobs[desc.Digest] = blob{mediaType: desc.MediaType, data: mb}
		owned[repo] = append(owned[repo], desc.Digest)
		for _, d := range append([]oci.Descriptor{m.Config}, m.Layers...) {
			blobs[d.Digest] = blob{mediaType: d.MediaType, data: l.Blobs[d.Digest]}
			owned[repo] = append(owned[repo], d.Digest)
		}
		out = append(out, Image{Repository: repo, Tag: tag, ManifestDigest: desc.Digest})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for d, b := range blobs {
		s.blobs[d] = b
	}
	for repo, ds := range owned {
		if s.owned[repo] == nil {
			s.owned[repo] = map[string]bool{}
		}
		for _, d := range ds {
			s.owned[repo][d] = true
		}
	}
	for _, im := range out {
		if s.repos[im.Repository] == nil {
			s.repos[im.Repository] = map[string]string{}
		}
		s.repos[im.Repository][im.Tag] = im.ManifestDigest
	}
	return out, nil
}

// LoadOCI serves the OCI image-layout tarball at path (one image, as
// image/oci/cmd/mkoci writes) as repo:tag, whatever name its index gives
// it, so one tarball can stand behind any reference a test pulls.
func (s *Server) LoadOCI(repo, tag, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("registry: opening image %s: %w", path, err)
	}
	defer f.Close()
	if _, err := s.Load(f, repo+":"+tag); err != nil {
		return fmt.Errorf("registry: loading %s as %s:%s: %w", path, repo, tag, err)
	}
	return nil
}

// OCIImage is one tarball to serve under Repository:Tag.
type OCIImage struct {
	Repository, Tag, Path string
}

// StartAnonymous starts a public registry (anonymous pulls, as a
// pull-through cache serves them) on addr with images loaded: the
// cluster's images behind the registry.berth.test name, which a guest
// reaches through its berth.dev/registry-mirrors mirror at
// http://10.0.2.2:<port> (awsstub.GuestURL of the URL returned). On
// error nothing is left running.
func StartAnonymous(addr string, images []OCIImage, log *slog.Logger) (s *Server, url string, stop func(), err error) {
	s = New(Config{Logger: log})
	for _, im := range images {
		if err := s.LoadOCI(im.Repository, im.Tag, im.Path); err != nil {
			return nil, "", nil, err
		}
	}
	url, stop, err = s.Start(addr)
	if err != nil {
		return nil, "", nil, err
	}
	return s, url, stop, nil
}

// dropHost removes a leading registry host (a first component with a dot,
// a colon, or "localhost"), as the distribution reference grammar reads it.
func dropHost(name string) string {
	first, rest, ok := strings.Cut(name, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return rest
	}
	return name
}

func splitRef(name string) (repo, tag string, err error) {
	slash := strings.LastIndex(name, "/")
	repo, tag = name, "latest"
	if i := strings.LastIndex(name, ":"); i > slash {
		repo, tag = name[:i], name[i+1:]
	}
	if !nameRE.MatchString(repo) {
		return "", "", fmt.Errorf("repository %q is not a valid name", repo)
	}
	if !tagRE.MatchString(tag) {
		return "", "", fmt.Errorf("tag %q is not a valid tag", tag)
	}
	return repo, tag, nil
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// route is a parsed request path.
type route struct {
	kind string // "base", "manifests" or "blobs"
	repo string
	ref  string
}

// parsePath reads /v2/, /v2/<name>/manifests/<ref> and
// /v2/<name>/blobs/<digest>.
func parsePath(p string) (route, bool) {
	if p == "/v2/" || p == "/v2" {
		return route{kind: "base"}, true
	}
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return route{}, false
	}
	for _, kind := range []string{"manifests", "blobs"} {
		i := strings.LastIndex(rest, "/"+kind+"/")
		if i <= 0 {
			continue
		}
		repo, ref := rest[:i], rest[i+len(kind)+2:]
		if !nameRE.MatchString(repo) || ref == "" {
			return route{}, false
		}
		if kind == "blobs" && !digestRE.MatchString(ref) {
			return route{}, false
		}
		if kind == "manifests" && !digestRE.MatchString(ref) && !tagRE.MatchString(ref) {
			return route{}, false
		}
		return route{kind: kind, repo: repo, ref: ref}, true
	}
	return route{}, false
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, code := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: code})
	s.log.Debug("registry", "method", r.Method, "path", r.URL.Path, "status", status)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return writeError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only")
	}
	if s.cfg.Authorize != nil {
		u, p, ok := r.BasicAuth()
		if !ok || !s.cfg.Authorize(u, p) {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+s.cfg.Realm+`"`)
			return writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		}
	}
	rt, ok := parsePath(r.URL.Path)
	if !ok {
		return writeError(w, http.StatusNotFound, "NAME_INVALID", "no such route "+r.URL.Path)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch rt.kind {
	case "base":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return http.StatusOK, ""
	case "manifests":
		tags, ok := s.repos[rt.repo]
		if !ok {
			return writeError(w, http.StatusNotFound, "NAME_UNKNOWN", "repository "+rt.repo+" not known")
		}
		d := rt.ref
		if !digestRE.MatchString(d) {
			if d, ok = tags[rt.ref]; !ok {
				return writeError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "tag "+rt.ref+" not known")
			}
		}
		b, ok := s.blobs[d]
		if !ok || !s.owned[rt.repo][d] {
			return writeError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest "+d+" not known")
		}
		return writeContent(w, r, d, b), ""
	default:
		b, ok := s.blobs[rt.ref]
		if !ok || !s.owned[rt.repo][rt.ref] {
			return writeError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob "+rt.ref+" not known")
		}
		return writeContent(w, r, rt.ref, b), ""
	}
}

func writeContent(w http.ResponseWriter, r *http.Request, d string, b blob) int {
	w.Header().Set("Content-Type", b.mediaType)
	w.Header().Set("Docker-Content-Digest", d)
	w.Header().Set("Content-Length", strconv.Itoa(len(b.data)))
	w.Header().Set("ETag", `"`+d+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b.data)
	}
	return http.StatusOK
}

// ErrorBody is the distribution spec's error shape.
type ErrorBody struct {
	Errors []ErrorDetail `json:"errors"`
}

// ErrorDetail is one error of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) (int, string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var body ErrorBody
	body.Errors = append(body.Errors, ErrorDetail{Code: code, Message: msg})
	_ = json.NewEncoder(w).Encode(body)
	return status, code
}
