package kubelet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Paths kubelet's files live at: nodeadm's, so docs and habits carry over.
const (
	ConfigPath           = "/etc/kubernetes/kubelet/config.json"
	ConfigDir            = "/etc/kubernetes/kubelet/config.json.d"
	DropInPath           = ConfigDir + "/40-berth.conf"
	KubeconfigPath       = "/var/lib/kubelet/kubeconfig"
	BootstrapKubeconfig  = "/var/lib/kubelet/bootstrap-kubeconfig"
	CACertPath           = "/etc/kubernetes/pki/ca.crt"
	ContainerRuntimeSock = "/run/containerd/containerd.sock"
	ContainerRuntimeURL  = "unix://" + ContainerRuntimeSock
	HealthzURL           = "http://127.0.0.1:10248/healthz"
	kubeletConfigAPI     = "kubelet.config.k8s.io/v1beta1"
	kubeletConfigKind    = "KubeletConfiguration"
	defaultClusterDomain = "cluster.local"
	defaultLogVerbosity  = 2
)

// Cgroups berth places services in; see the package doc.
const (
	RuntimeCgroup    = "/runtime.slice"
	ContainerdCgroup = RuntimeCgroup + "/containerd"
	KubeletCgroup    = RuntimeCgroup + "/kubelet"
	SystemCgroup     = "/system.slice"
)

// ConfigInputs are the facts the kubelet configuration depends on.
type ConfigInputs struct {
	// ClusterDNS is the cluster DNS address (see ClusterDNS).
	ClusterDNS string
	// ProviderID is aws:///<az>/<instance-id> (see ProviderID).
	ProviderID string
	// MaxPods is the EFFECTIVE max pods: the table or expression's value,
	// or the user's kubelet.config maxPods when set.
	MaxPods int32
	// CPUs is the machine's core count, for kubeReserved.
	CPUs int
	// Toggles are nodeadm's settings for the image's kubelet version (see
	// VersionToggles); the plan may have narrowed them to fit the user's
	// kubelet.config.
	Toggles Toggles
}

// ProviderID is the cloud provider ID the AWS cloud controller expects.
func ProviderID(availabilityZone, instanceID string) string {
	return fmt.Sprintf("aws:///%s/%s", availabilityZone, instanceID)
}

// VolumePluginDir is where kubelet looks for flexvolume drivers: writable
// state, unlike the read-only image.
const VolumePluginDir = "/var/lib/kubelet/volumeplugins"

// Config is the base KubeletConfiguration: nodeadm's defaults and version
// toggles, except cgroupDriver cgroupfs and the cgroups of berth's layout.
func Config(in ConfigInputs) *KubeletConfiguration {
	f, t := false, true
	c := &KubeletConfiguration{
		APIVersion: kubeletConfigAPI,
		Kind:       kubeletConfigKind,
		Address:    "0.0.0.0",
		Authentication: KubeletAuthentication{
			Anonymous: KubeletAnonymousAuthentication{Enabled: &f},
			Webhook: KubeletWebhookAuthentication{
				Enabled:  &t,
				CacheTTL: Duration{Duration: 2 * time.Minute},
			},
			X509: KubeletX509Authentication{ClientCAFile: CACertPath},
		},
		Authorization: KubeletAuthorization{
			Mode: authorizationModeWebhook,
			Webhook: KubeletWebhookAuthorization{
				CacheAuthorizedTTL:   Duration{Duration: 5 * time.Minute},
				CacheUnauthorizedTTL: Duration{Duration: 30 * time.Second},
			},
		},
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               "/",
		KubeletCgroups:           KubeletCgroup,
		KubeReservedCgroup:       RuntimeCgroup,
		SystemReservedCgroup:     SystemCgroup,
		ClusterDNS:               []string{in.ClusterDNS},
		ClusterDomain:            defaultClusterDomain,
		ContainerRuntimeEndpoint: ContainerRuntimeURL,
		EvictionHard: map[string]string{
			"memory.available":  "100Mi",
			"nodefs.available":  "10%",
			"nodefs.inodesFree": "5%",
		},
		FeatureGates:          map[string]bool{"RotateKubeletServerCertificate": true},
		HairpinMode:           hairpinVeth,
		ProtectKernelDefaults: true,
		// The default, /usr/libexec/kubernetes/kubelet-plugins/volume/exec,
		// is on berth's read-only root image.
		VolumePluginDir:     VolumePluginDir,
		ReadOnlyPort:        0,
		Logging:             LoggingConfiguration{Verbosity: defaultLogVerbosity},
		SerializeImagePulls: &f,
		ServerTLSBootstrap:  true,
		TLSCipherSuites: []string{
			"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
			"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
			"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
			"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
			"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
			"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
			"TLS_RSA_WITH_AES_128_GCM_SHA256",
			"TLS_RSA_WITH_AES_256_GCM_SHA384",
		},
		ProviderID:   in.ProviderID,
		MaxPods:      in.MaxPods,
		KubeReserved: KubeReserved(in.CPUs, in.MaxPods),
	}
	in.Toggles.apply(c)
	return c
}

// MarshalConfig writes a KubeletConfiguration as indented JSON with keys
// sorted, so the same value always gives the same bytes. Fields left at
// their Go zero value are dropped: the v1beta1 struct has non-pointer
// durations and structs that encoding/json cannot omit ("syncFrequency":
// "0s", "memorySwap": {}), and writing them would only obscure what berth
// chose; kubelet defaults them the same either way. Pointer fields berth
// sets (even to false) are not zero and stay.
func MarshalConfig(c *KubeletConfiguration) ([]byte, error) {
	got, err := toGeneric(c)
	if err != nil {
		return nil, err
	}
	zero, err := toGeneric(&KubeletConfiguration{})
	if err != nil {
		return nil, err
	}
	return marshalIndent(pruneZero(got, zero))
}

func toGeneric(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet configuration: %w", err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding kubelet configuration: %w", err)
	}
	return m, nil
}

// pruneZero drops from got every key whose value equals zero's (the
// encoding of the zero struct), recursing into objects, and then objects
// left empty by that.
func pruneZero(got, zero map[string]any) map[string]any {
	for k, v := range got {
		z, ok := zero[k]
		if !ok {
			continue
		}
		if gm, ok := v.(map[string]any); ok {
			if zm, ok := z.(map[string]any); ok {
				if len(pruneZero(gm, zm)) == 0 {
					delete(got, k)
				}
				continue
			}
		}
		if reflect.DeepEqual(v, z) {
			delete(got, k)
		}
	}
	return got
}

func marshalIndent(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding kubelet configuration: %w", err)
	}
	return b.Bytes(), nil
}

// DropIn renders the user's kubelet.config as a drop-in for --config-dir.
// kubelet only accepts a drop-in that says what it is, so apiVersion and
// kind are added unless the user wrote them. Keys come out sorted.
func DropIn(user map[string]json.RawMessage) ([]byte, error) {
	doc := make(map[string]json.RawMessage, len(user)+2)
	for k, v := range user {
		doc[k] = v
	}
	if _, ok := doc["apiVersion"]; !ok {
		doc["apiVersion"] = json.RawMessage(`"` + kubeletConfigAPI + `"`)
	}
	if _, ok := doc["kind"]; !ok {
		doc["kind"] = json.RawMessage(`"` + kubeletConfigKind + `"`)
	}
	// Round-trip through any so nested objects are re-indented and their
	// keys sorted whatever the user's layout was.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding kubelet.config drop-in: %w", err)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding kubelet.config drop-in: %w", err)
	}
	return marshalIndent(v)
}
