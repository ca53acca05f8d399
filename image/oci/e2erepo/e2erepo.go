// Package e2erepo maps the registries Kubernetes' e2e suite pulls its
// images from to the registry stand-in the test cluster's nodes pull from,
// so the conformance suite runs offline. The suite reads the mapping from
// the YAML file KUBE_TEST_REPO_LIST names (k8s.io/kubernetes
// test/utils/image's RegistryList); the e2e images are built under their
// upstream names (registry.k8s.io/e2e-test-images/agnhost:2.59), and
// LocalRef gives the name each is served and pulled under.
//
// The rule is one prefix: a registry R becomes Local/R, so
// registry.k8s.io/e2e-test-images/agnhost:2.59 is pulled as
// registry.berth.test/registry.k8s.io/e2e-test-images/agnhost:2.59. Every
// upstream name survives whole in its local one (as a pull-through cache
// names them), no two upstream registries can land on one local name, and
// the invalid registry's images stay unserved, so their pulls still fail,
// now without a lookup on the internet.
package e2erepo

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/berth-node/berth/internal/syntax"
)

// registryList is RegistryList's keys and their upstream values, copied
// from k8s.io/kubernetes v1.35.4 test/utils/image/manifest.go
// (initRegistry). A key missing here would keep its upstream registry,
// which a node cannot reach: the e2e components test runs e2e.test
// --list-images with the file and fails on any image left outside the
// local registry.
func registryList() map[string]string {
	return map[string]string{
		"promoterE2eRegistry":      "registry.k8s.io/e2e-test-images",
		"buildImageRegistry":       "registry.k8s.io/build-image",
		"invalidRegistry":          "invalid.registry.k8s.io/invalid",
		"gcEtcdRegistry":           "registry.k8s.io",
		"gcRegistry":               "registry.k8s.io",
		"sigStorageRegistry":       "registry.k8s.io/sig-storage",
		"privateRegistry":          "gcr.io/k8s-authenticated-test",
		"dockerLibraryRegistry":    "docker.io/library",
		"cloudProviderGcpRegistry": "registry.k8s.io/cloud-provider-gcp",
	}
}

// Keys returns RegistryList's keys, sorted.
func Keys() []string {
	var keys []string
	for k := range registryList() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Registries returns the suite's upstream registries, sorted, each once
// (gcRegistry and gcEtcdRegistry are both registry.k8s.io).
func Registries() []string {
	var rs []string
	for _, r := range registryList() {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	return slices.Compact(rs)
}

// pathComponent is the distribution spec's repository name component.
var pathComponent = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*$`)

// checkLocal refuses a local registry no image reference can start with:
// HOST[:PORT][/PATH], as a reference's first part.
func checkLocal(local string) error {
	hostPort, p, _ := strings.Cut(local, "/")
	host, port, hasPort := strings.Cut(hostPort, ":")
	if err := syntax.DNSName(host); err != nil {
		return fmt.Errorf("local registry %q: host %q: %w", local, host, err)
	}
	if hasPort {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("local registry %q: port %q: want 1 to 65535", local, port)
		}
	}
	if strings.Contains(local, "/") {
		for _, c := range strings.Split(p, "/") {
			if !pathComponent.MatchString(c) {
				return fmt.Errorf("local registry %q: path component %q: want lowercase letters and digits, with . _ - between them", local, c)
			}
		}
	}
	return nil
}

// RepoList returns the KUBE_TEST_REPO_LIST file that sends every registry
// of the suite to local.
func RepoList(local string) ([]byte, error) {
	if err := checkLocal(local); err != nil {
		return nil, err
	}
	m := registryList()
	for k, r := range m {
		m[k] = local + "/" + r
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the KUBE_TEST_REPO_LIST file: %w", err)
	}
	return append([]byte("# KUBE_TEST_REPO_LIST for e2e.test: every registry of the suite under "+local+" (image/oci/e2erepo).\n"), b...), nil
}

// LocalRef returns the name the upstream image ref (REGISTRY/NAME:TAG, as
// e2e.test --list-images prints it without a repo list) is served and
// pulled under once the suite reads RepoList(local).
func LocalRef(local, ref string) (string, error) {
	if err := checkLocal(local); err != nil {
		return "", err
	}
	for _, r := range Registries() {
		rest, ok := strings.CutPrefix(ref, r+"/")
		if !ok {
			continue
		}
		if i := strings.LastIndex(rest, ":"); i <= 0 || i == len(rest)-1 || strings.ContainsAny(rest, "@ ") {
			return "", fmt.Errorf("image %q: want %s/NAME:TAG", ref, r)
		}
		return local + "/" + ref, nil
	}
	return "", fmt.Errorf("image %q: in none of the e2e suite's registries (%s)", ref, strings.Join(Registries(), ", "))
}
