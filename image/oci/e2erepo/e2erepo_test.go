package e2erepo

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The file sends each of RegistryList's keys under the local registry,
// keeping the upstream registry whole after it, and nothing else.
func TestRepoList(t *testing.T) {
	b, err := RepoList("registry.berth.test")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := yaml.UnmarshalStrict(b, &got); err != nil {
		t.Fatalf("the file is not a YAML map of strings: %v\n%s", err, b)
	}
	want := map[string]string{
		"promoterE2eRegistry":      "registry.berth.test/registry.k8s.io/e2e-test-images",
		"buildImageRegistry":       "registry.berth.test/registry.k8s.io/build-image",
		"invalidRegistry":          "registry.berth.test/invalid.registry.k8s.io/invalid",
		"gcEtcdRegistry":           "registry.berth.test/registry.k8s.io",
		"gcRegistry":               "registry.berth.test/registry.k8s.io",
		"sigStorageRegistry":       "registry.berth.test/registry.k8s.io/sig-storage",
		"privateRegistry":          "registry.berth.test/gcr.io/k8s-authenticated-test",
		"dockerLibraryRegistry":    "registry.berth.test/docker.io/library",
		"cloudProviderGcpRegistry": "registry.berth.test/registry.k8s.io/cloud-provider-gcp",
	}
	if len(got) != len(want) {
		t.Errorf("%d keys, want %d:\n%s", len(got), len(want), b)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if keys := Keys(); len(keys) != len(want) || keys[0] != "buildImageRegistry" {
		t.Errorf("Keys() = %v", keys)
	}
	// registry.k8s.io serves two keys, and is listed once.
	if rs := Registries(); len(rs) != len(want)-1 || rs[0] != "docker.io/library" {
		t.Errorf("Registries() = %v", rs)
	}
}

func TestLocalRef(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/e2e-test-images/agnhost:2.59":   "registry.berth.test:5000/registry.k8s.io/e2e-test-images/agnhost:2.59",
		"registry.k8s.io/pause:3.10.1":                   "registry.berth.test:5000/registry.k8s.io/pause:3.10.1",
		"docker.io/library/nginx:1.27":                   "registry.berth.test:5000/docker.io/library/nginx:1.27",
		"registry.k8s.io/e2e-test-images/volume/nfs:1.4": "registry.berth.test:5000/registry.k8s.io/e2e-test-images/volume/nfs:1.4",
	} {
		got, err := LocalRef("registry.berth.test:5000", ref)
		if err != nil || got != want {
			t.Errorf("LocalRef(%s) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for ref, errHas := range map[string]string{
		"quay.io/x/y:1":                   "in none of the e2e suite's registries",
		"registry.k8s.io/e2e-test-images": "NAME:TAG",
		"registry.k8s.io/pause":           "want registry.k8s.io/NAME:TAG",
		"registry.k8s.io/pause:":          "want registry.k8s.io/NAME:TAG",
		"registry.k8s.io/pause@sha256:00": "NAME:TAG",
	} {
		if got, err := LocalRef("registry.berth.test", ref); err == nil || !strings.Contains(err.Error(), errHas) {
			t.Errorf("LocalRef(%s) = %q, %v; want an error containing %q", ref, got, err, errHas)
		}
	}
}

func TestLocalRejected(t *testing.T) {
	for local, errHas := range map[string]string{
		"":                       "host",
		"registry..test":         "host",
		"registry.berth.test:0":  "port",
		"registry.berth.test:ab": "port",
		"registry.berth.test/":   "path component \"\"",
		"registry.berth.test/Up": "path component \"Up\"",
		"http://registry":        "port",
	} {
		if _, err := RepoList(local); err == nil || !strings.Contains(err.Error(), errHas) {
			t.Errorf("RepoList(%q) = %v, want an error containing %q", local, err, errHas)
		}
		if _, err := LocalRef(local, "registry.k8s.io/pause:3.10.1"); err == nil || !strings.Contains(err.Error(), errHas) {
			t.Errorf("LocalRef(%q, ...) = %v, want an error containing %q", local, err, errHas)
		}
	}
}
