package kubelet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Preloaded images and kubelet's pull records.
//
// kubelet 1.35 turns KubeletEnsureSecretPulledImages on (beta): it keeps a
// record per image ID (PulledRecordsDir) of the image names it pulled that
// ID under and with which credentials. Under the default policy,
// NeverVerifyPreloadedImages, an image with no record is "preloaded" and any
// pod may use it; but once kubelet pulls the same image ID under another
// name (an ECR mirror of an imported image, the registry name of berth's
// demo image), the ID has a record that lacks the imported name, and a pod
// naming the imported image is refused (ErrImageNeverPull with pull policy
// Never: "is not present"; a pull it cannot do with IfNotPresent). Upstream
// knows it (kubernetes/kubernetes#138175, open; KEP-2535's "improve
// identifying preloaded images"). berth writes, before kubelet starts, the
// record kubelet would write had it pulled the image itself with no
// credentials: each imported name is node-accessible. kubelet merges its own
// pulls into that record, so the imported name survives them.

// PulledRecordsDir is where kubelet keeps its ImagePulledRecords (its
// root dir's image_manager/pulled), one file per image ID.
const PulledRecordsDir = "/var/lib/kubelet/image_manager/pulled"

const (
	policyKey      = "imagePullCredentialsVerificationPolicy"
	pulledRecordV1 = "kubelet.config.k8s.io/v1beta1"
	pulledRecordV0 = "kubelet.config.k8s.io/v1alpha1"
	pulledKind     = "ImagePulledRecord"
)

// pulledRecord is kubelet.config.k8s.io/v1beta1 ImagePulledRecord, field
// for field and in its order (k8s.io/kubelet's types would add 7 MB of
// dependencies to berth; TestLocalRecordTypesAreUpstreams keeps them
// equal). Every field is here: berth rewrites records kubelet wrote, and
// must keep all of a record it merges into.
type pulledRecord struct {
	Kind              string                     `json:"kind,omitempty"`
	APIVersion        string                     `json:"apiVersion,omitempty"`
	LastUpdatedTime   *string                    `json:"lastUpdatedTime"`
	ImageRef          string                     `json:"imageRef"`
	CredentialMapping map[string]pullCredentials `json:"credentialMapping,omitempty"`
}

type pullCredentials struct {
	KubernetesSecrets         []pullSecret         `json:"kubernetesSecrets,omitempty"`
	KubernetesServiceAccounts []pullServiceAccount `json:"kubernetesServiceAccounts,omitempty"`
	NodePodsAccessible        bool                 `json:"nodePodsAccessible,omitempty"`
}

type pullSecret struct {
	UID            string `json:"uid"`
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	CredentialHash string `json:"credentialHash"`
}

type pullServiceAccount struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// PreloadedImage is an image berth imports: the name it is imported under
// and its image ID (manifest.Image's ID).
type PreloadedImage struct {
	Name string
	ID   string
}

// PulledRecord is the pull record berth keeps for one image ID: Repos are
// the imported names without tag or digest, as kubelet keys them.
type PulledRecord struct {
	ImageRef string
	Repos    []string
}

// PulledRecordPath is the file kubelet reads imageRef's record from: the
// SHA-256 of the ref, since a ref holds ':' and '/' (kubelet's
// cacheFilename).
func PulledRecordPath(imageRef string) string {
	sum := sha256.Sum256([]byte(imageRef))
	return PulledRecordsDir + "/sha256-" + hex.EncodeToString(sum[:])
}

// RecordsPreloaded says whether berth writes pull records for its
// preloaded images under the user's kubelet.config: yes under kubelet's
// default imagePullCredentialsVerificationPolicy, NeverVerifyPreloadedImages,
// and no under any other. AlwaysVerify and NeverVerifyAllowlistedImages ask
// kubelet to check credentials even for preloaded images, which a record
// saying "node-accessible" would defeat; NeverVerify needs none.
func RecordsPreloaded(user map[string]json.RawMessage) (bool, error) {
	raw, ok := user[policyKey]
	if !ok {
		return true, nil
	}
	var policy string
	if err := json.Unmarshal(raw, &policy); err != nil {
		return false, fmt.Errorf("spec.kubelet.config.%s: %w", policyKey, err)
	}
	return policy == "NeverVerifyPreloadedImages", nil
}

// PreloadedRecords decides the pull records for the imported images, one
// per image ID. An image with no ID (a manifest from before IDs) or a name
// that is not an image reference is left out, with an error naming it; the
// others are still returned.
func PreloadedRecords(images []PreloadedImage) ([]PulledRecord, error) {
	byID := map[string][]string{}
	var errs []error
	for _, im := range images {
		if !strings.HasPrefix(im.ID, "sha256:") {
			errs = append(errs, fmt.Errorf("image %s: no image ID in the manifest (%q), so kubelet may refuse its name once it pulls the same image under another", im.Name, im.ID))
			continue
		}
		repo, err := ImageRepo(im.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("image %s: %w", im.Name, err))
			continue
		}
		if !slices.Contains(byID[im.ID], repo) {
			byID[im.ID] = append(byID[im.ID], repo)
		}
	}
	var out []PulledRecord
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		repos := byID[id]
		slices.Sort(repos)
		out = append(out, PulledRecord{ImageRef: id, Repos: repos})
	}
	return out, errors.Join(errs...)
}

// ImageRepo is an image reference's repository, normalized, without tag or
// digest: what kubelet keys a pull record's names by (its
// parsers.ParseImageName, distribution/reference's ParseNormalizedNamed
// and Name). "busybox:1.37" is docker.io/library/busybox.
func ImageRepo(ref string) (string, error) {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	if name == "" {
		return "", fmt.Errorf("%q is not an image reference", ref)
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || !strings.ContainsAny(domain, ".:") && domain != "localhost" && domain == strings.ToLower(domain) {
		domain, rest = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	for _, c := range strings.Split(rest, "/") {
		if c == "" || c != strings.ToLower(c) || strings.Trim(c, "abcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
			return "", fmt.Errorf("%q is not an image reference: path component %q", ref, c)
		}
	}
	return domain + "/" + rest, nil
}

// MergePulledRecord returns the record file for rec: existing (the file
// kubelet or an earlier boot wrote, nil when there is none) with each of
// rec's repos marked node-accessible, everything else in it kept. changed
// is false when existing already says so. An existing file that is not an
// ImagePulledRecord of a version this berth knows, or of another image,
// is an error: kubelet owns it, and berth leaves it alone.
func MergePulledRecord(existing []byte, rec PulledRecord, now time.Time) (out []byte, changed bool, err error) {
	r := pulledRecord{ImageRef: rec.ImageRef}
	if existing != nil {
		dec := json.NewDecoder(bytes.NewReader(existing))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, false, fmt.Errorf("reading kubelet's pull record: %w", err)
		}
		if r.Kind != pulledKind || r.APIVersion != pulledRecordV1 && r.APIVersion != pulledRecordV0 {
			return nil, false, fmt.Errorf("kubelet's pull record is %s %s, want %s %s or %s", r.APIVersion, r.Kind, pulledRecordV1, pulledKind, pulledRecordV0)
		}
		if r.ImageRef != rec.ImageRef {
			return nil, false, fmt.Errorf("kubelet's pull record for %s names imageRef %q", rec.ImageRef, r.ImageRef)
		}
	} else {
		changed = true
	}
	if r.CredentialMapping == nil {
		r.CredentialMapping = map[string]pullCredentials{}
	}
	for _, repo := range rec.Repos {
		if r.CredentialMapping[repo].NodePodsAccessible {
			continue
		}
		// kubelet's own merge of a node-accessible pull drops the
		// secrets and service accounts: anyone on the node may use it.
		r.CredentialMapping[repo] = pullCredentials{NodePodsAccessible: true}
		changed = true
	}
	if !changed {
		return existing, false, nil
	}
	r.Kind, r.APIVersion = pulledKind, pulledRecordV1
	ts := now.UTC().Format(time.RFC3339)
	r.LastUpdatedTime = &ts
	out, err = json.Marshal(&r)
	if err != nil {
		return nil, false, fmt.Errorf("encoding the pull record of %s: %w", rec.ImageRef, err)
	}
	return out, true, nil
}
