package controlplane

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/berth-node/berth/config/nodeconfig"
	"sigs.k8s.io/yaml"
)

// Addons are what kubeadm's addon phase and EKS's default add-ons put into a
// new cluster, for the test control plane: a CNI (the CNI installer
// DaemonSet, as aws-node, or flannel), kube-proxy and CoreDNS. ApplyAddons
// fills the zero address fields from the cluster; renderAddons needs them
// all.
type Addons struct {
	// Image references, each with a tag or digest (a pull policy of
	// IfNotPresent means nothing for an implicit :latest). A cluster has a
	// CNI or no node goes Ready; kube-proxy and CoreDNS are left out when
	// their image is empty: most node tests need no Service or DNS, and
	// under TCG every extra pod costs the guest seconds of CPU.
	InstallCNIImage string
	KubeProxyImage  string
	CoreDNSImage    string
	// FlannelImage and FlannelCNIPluginImage, given together, make the CNI
	// flannel instead of install-cni: flannel's upstream manifest
	// (addons/kube-flannel.yml, v0.28.10, vxlan), changed only in its
	// image names and its pod network (ClusterCIDR). install-cni's bridge
	// keeps each node's pods to that node; flannel routes between nodes.
	FlannelImage          string
	FlannelCNIPluginImage string
	// APIServer is the API server URL as a guest dials it
	// (Info.APIServerEndpoint): install-cni and kube-proxy run on the
	// host's network before the kubernetes Service's ClusterIP works, since
	// kube-proxy is what makes it work.
	APIServer string
	// ClusterCIDR is the pod range (kube-proxy's clusterCIDR); ServiceCIDR
	// is the Service range, which holds DNSIP.
	ClusterCIDR string
	ServiceCIDR string
	// DNSIP is kube-dns's ClusterIP; when empty, the address berth's
	// kubelet configuration derives from the service CIDR
	// (nodeconfig.ClusterDNS: 10.96.0.10 for 10.96.0.0/12), so pods' resolv.conf
	// and the Service agree.
	DNSIP string
	// CoreDNSReplicas defaults to 1. EKS runs 2, spread over nodes by the
	// Deployment's anti-affinity, so one node's loss keeps DNS up; the test
	// rig has one node, where a second replica buys no availability and
	// costs the small VM memory and a second start before DNS is ready.
	CoreDNSReplicas int
}

// Addons returns the add-ons for this cluster with the given images: the
// guest's API server URL and the CIDRs come from the control plane's
// options.
func (c *Cluster) Addons(installCNI, kubeProxy, coreDNS string) Addons {
	return c.fillAddons(Addons{InstallCNIImage: installCNI, KubeProxyImage: kubeProxy, CoreDNSImage: coreDNS})
}

func (c *Cluster) fillAddons(a Addons) Addons {
	if a.APIServer == "" {
		a.APIServer = c.info.APIServerEndpoint
	}
	if a.ClusterCIDR == "" {
		a.ClusterCIDR = c.opts.ClusterCIDR
	}
	if a.ServiceCIDR == "" {
		a.ServiceCIDR = c.opts.ServiceCIDR
	}
	return a
}

// ApplyAddons applies every add-on object through the API, in dependency
// order (service accounts and RBAC before the workloads that use them).
// It uses server-side apply, not create: a second create of kube-dns is
// refused for its taken ClusterIP before the name conflict is seen, and on
// a kept state directory the apiserver's port, which the ConfigMaps and
// env name, may have changed since the objects were made.
func (c *Cluster) ApplyAddons(ctx context.Context, a Addons) error {
	objs, err := renderAddons(c.fillAddons(a))
	if err != nil {
		return err
	}
	host := c.hostEndpoint()
	for _, o := range objs {
		if err := c.apply(ctx, host, o); err != nil {
			return fmt.Errorf("applying add-ons: %w", err)
		}
	}
	c.log.Info("add-ons applied", "objects", len(objs))
	return nil
}

// applyFieldManager owns the add-ons' fields; force takes over fields
// another manager (kubectl edit, a controller's defaults) set, as
// kubeadm's addon phase overwrites what it owns.
const applyFieldManager = "berth-controlplane"

// apply creates or updates an object with server-side apply.
func (c *Cluster) apply(ctx context.Context, host string, o object) error {
	body, err := json.Marshal(o.Body)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", o.Path, err)
	}
	kind := o.Body["kind"]
	name, _ := o.Body["metadata"].(map[string]any)["name"].(string)
	u := host + o.Path + "/" + url.PathEscape(name) + "?fieldManager=" + applyFieldManager + "&force=true"
	req, err := http.NewRequestWithContext(ctx, http.MethodPatch, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", kind, name, err)
	}
	// JSON is YAML, which is what an apply patch is.
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("applying %s %s at %s: %w", kind, name, o.Path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("applying %s %s at %s: %s: %.300s", kind, name, o.Path, resp.Status, rb)
	}
	return nil
}

//go:embed addons/*.yaml addons/kube-flannel.yml
var addonTemplates embed.FS

// addonFiles are rendered in this order; within a file, documents keep
// theirs. The first is the CNI: install-cni's or flannel's.
var addonFiles = []string{"install-cni.yaml", "kube-flannel.yml", "kube-proxy.yaml", "coredns.yaml"}

// addonValues are Addons checked and resolved, as the templates use them.
type addonValues struct {
	InstallCNIImage, KubeProxyImage, CoreDNSImage string
	FlannelImage, FlannelCNIPluginImage           string
	APIServer, APIServerHost, APIServerPort       string
	ClusterCIDR, ServiceCIDR, DNSIP               string
	CoreDNSReplicas                               int
}

// flannelManifestEdits are what renderFlannel replaces in flannel's
// manifest, addons/kube-flannel.yml (flannel v0.28.10's
// Documentation/kube-flannel.yml, byte for byte as upstream ships it):
// each string exactly as often as upstream has it, so a manifest update
// that moves one fails here, by name, instead of deploying ghcr.io's
// images, which nothing here can pull.
var flannelManifestEdits = []struct {
	field, upstream string
	count           int
	value           func(addonValues) string
}{
	{"FlannelCNIPluginImage", "image: ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel3", 1, func(v addonValues) string { return "image: " + v.FlannelCNIPluginImage }},
	{"FlannelImage", "image: ghcr.io/flannel-io/flannel:v0.28.10", 2, func(v addonValues) string { return "image: " + v.FlannelImage }},
	{"ClusterCIDR", `"Network": "10.244.0.0/16"`, 1, func(v addonValues) string { return `"Network": "` + v.ClusterCIDR + `"` }},
}

// renderFlannel is flannel's manifest with this cluster's images and pod
// network.
func renderFlannel(v addonValues) ([]byte, error) {
	b, err := addonTemplates.ReadFile("addons/kube-flannel.yml")
	if err != nil {
		return nil, fmt.Errorf("reading flannel's manifest: %w", err)
	}
	s := string(b)
	for _, e := range flannelManifestEdits {
		if n := strings.Count(s, e.upstream); n != e.count {
			return nil, fmt.Errorf("flannel's manifest addons/kube-flannel.yml has %q %d times, want %d (where %s goes): was it updated without renderFlannel?", e.upstream, n, e.count, e.field)
		}
		s = strings.ReplaceAll(s, e.upstream, e.value(v))
	}
	return []byte(s), nil
}

// renderAddons checks a and renders every add-on object, in the order they
// are to be created.
func renderAddons(a Addons) ([]object, error) {
	v, err := a.resolve()
	if err != nil {
		return nil, err
	}
	// Every value is inserted as a JSON string, which YAML reads back as
	// the same string: a value cannot add or change fields.
	funcs := template.FuncMap{"quote": func(s string) (string, error) {
		b, err := json.Marshal(s)
		return string(b), err
	}}
	flannel := v.FlannelImage != ""
	var objs []object
	for _, f := range addonFiles {
		if (f == "kube-proxy.yaml" && v.KubeProxyImage == "") || (f == "coredns.yaml" && v.CoreDNSImage == "") ||
			(f == "install-cni.yaml" && flannel) || (f == "kube-flannel.yml" && !flannel) {
			continue
		}
		if f == "kube-flannel.yml" {
			b, err := renderFlannel(v)
			if err != nil {
				return nil, err
			}
			got, err := splitObjects(f, b)
			if err != nil {
				return nil, err
			}
			objs = append(objs, got...)
			continue
		}
		tmpl, err := template.New(f).Funcs(funcs).Option("missingkey=error").ParseFS(addonTemplates, "addons/"+f)
		if err != nil {
			return nil, fmt.Errorf("parsing add-on template %s: %w", f, err)
		}
		var buf bytes.Buffer
		if err := tmpl.Execute(&buf, v); err != nil {
			return nil, fmt.Errorf("rendering add-on template %s: %w", f, err)
		}
		got, err := splitObjects(f, buf.Bytes())
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// splitObjects decodes a multi-document YAML file into API objects, each
// with the collection path it is POSTed to.
func splitObjects(file string, data []byte) ([]object, error) {
	var objs []object
	for i, doc := range docSeparator.Split(string(data), -1) {
		var body map[string]any
		if err := yaml.Unmarshal([]byte(doc), &body); err != nil {
			return nil, fmt.Errorf("add-on template %s, document %d: %w", file, i, err)
		}
		if body == nil {
			continue // comments only
		}
		path, err := collectionPath(body)
		if err != nil {
			return nil, fmt.Errorf("add-on template %s, document %d: %w", file, i, err)
		}
		objs = append(objs, object{Path: path, Body: body})
	}
	return objs, nil
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// addonKinds are the kinds the add-ons use: their resource (plural) name,
// and whether they live in a namespace. A kind not listed is refused rather
// than guessed.
var addonKinds = map[string]struct {
	resource   string
	namespaced bool
}{
	"Namespace":          {"namespaces", false},
	"ServiceAccount":     {"serviceaccounts", true},
	"ConfigMap":          {"configmaps", true},
	"Service":            {"services", true},
	"DaemonSet":          {"daemonsets", true},
	"Deployment":         {"deployments", true},
	"ClusterRole":        {"clusterroles", false},
	"ClusterRoleBinding": {"clusterrolebindings", false},
}

// collectionPath is the URL path an object is created at, from its
// apiVersion, kind and namespace.
func collectionPath(body map[string]any) (string, error) {
	apiVersion, _ := body["apiVersion"].(string)
	kind, _ := body["kind"].(string)
	meta, _ := body["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return "", fmt.Errorf("object %s %q: apiVersion, kind and metadata.name are required", kind, name)
	}
	k, ok := addonKinds[kind]
	if !ok {
		return "", fmt.Errorf("object %s %s: kind not known to the add-on applier", kind, name)
	}
	prefix := "/apis/" + apiVersion
	if apiVersion == "v1" {
		prefix = "/api/v1"
	}
	switch {
	case k.namespaced && ns == "":
		return "", fmt.Errorf("object %s %s: metadata.namespace is required", kind, name)
	case !k.namespaced && ns != "":
		return "", fmt.Errorf("object %s %s: cluster-scoped, but has metadata.namespace %q", kind, name, ns)
	case k.namespaced:
		return prefix + "/namespaces/" + ns + "/" + k.resource, nil
	}
	return prefix + "/" + k.resource, nil
}

// resolve checks every field and derives the DNS IP and the API server's
// host and port.
func (a Addons) resolve() (addonValues, error) {
	v := addonValues{
		InstallCNIImage:       a.InstallCNIImage,
		KubeProxyImage:        a.KubeProxyImage,
		CoreDNSImage:          a.CoreDNSImage,
		FlannelImage:          a.FlannelImage,
		FlannelCNIPluginImage: a.FlannelCNIPluginImage,
		CoreDNSReplicas:       a.CoreDNSReplicas,
	}
	// The CNI is required: install-cni's image, or both of flannel's.
	flannel := a.FlannelImage != "" || a.FlannelCNIPluginImage != ""
	if flannel && a.InstallCNIImage != "" {
		return v, fmt.Errorf("add-ons: InstallCNIImage %q and flannel's images both given: a cluster has one CNI", a.InstallCNIImage)
	}
	for field, ref := range map[string]string{"InstallCNIImage": a.InstallCNIImage, "KubeProxyImage": a.KubeProxyImage, "CoreDNSImage": a.CoreDNSImage,
		"FlannelImage": a.FlannelImage, "FlannelCNIPluginImage": a.FlannelCNIPluginImage} {
		required := (field == "InstallCNIImage" && !flannel) || ((field == "FlannelImage" || field == "FlannelCNIPluginImage") && flannel)
		if ref == "" && !required {
			continue // that add-on is left out
		}
		if err := checkImageRef(ref); err != nil {
			return v, fmt.Errorf("add-ons %s: %w", field, err)
		}
	}
	if v.CoreDNSReplicas == 0 {
		v.CoreDNSReplicas = 1
	}
	if v.CoreDNSReplicas < 0 {
		return v, fmt.Errorf("add-ons CoreDNSReplicas %d: must not be negative", a.CoreDNSReplicas)
	}
	var err error
	if v.APIServer, v.APIServerHost, v.APIServerPort, err = splitAPIServer(a.APIServer); err != nil {
		return v, err
	}
	cluster, err := parseIPv4CIDR("ClusterCIDR", a.ClusterCIDR, DefaultClusterCIDR)
	if err != nil {
		return v, err
	}
	v.ClusterCIDR = cluster.String()
	service, err := parseIPv4CIDR("ServiceCIDR", a.ServiceCIDR, DefaultServiceCIDR)
	if err != nil {
		return v, err
	}
	if cluster.Overlaps(service) {
		return v, fmt.Errorf("add-ons: ClusterCIDR %s and ServiceCIDR %s overlap", cluster, service)
	}
	v.ServiceCIDR = service.String()
	if v.DNSIP = a.DNSIP; v.DNSIP == "" {
		if v.DNSIP, err = nodeconfig.ClusterDNS(a.ServiceCIDR); err != nil {
			return v, fmt.Errorf("add-ons: deriving the DNS IP: %w", err)
		}
	}
	dns, err := netip.ParseAddr(v.DNSIP)
	if err != nil {
		return v, fmt.Errorf("add-ons DNSIP %q: %w", v.DNSIP, err)
	}
	// The kubernetes Service holds the first address; the network address
	// is no Service's.
	if !service.Contains(dns) || dns == service.Addr() || dns == service.Addr().Next() {
		return v, fmt.Errorf("add-ons DNSIP %s: not a free address of ServiceCIDR %s (the first is the kubernetes Service's)", dns, service)
	}
	return v, nil
}

// parseIPv4CIDR parses a CIDR field, masked (the API server masks the
// ranges it is given too).
func parseIPv4CIDR(field, s, example string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("add-ons %s %q: want an IPv4 CIDR such as %s: %w", field, s, example, err)
	}
	if !p.Addr().Is4() {
		return p, fmt.Errorf("add-ons %s %q: only IPv4 is supported (the test rig's QEMU network is IPv4)", field, s)
	}
	return p.Masked(), nil
}

// splitAPIServer checks the guest's API server URL: https, an IP address
// (hostNetwork pods dial it before cluster DNS exists) and a port.
func splitAPIServer(s string) (endpoint, host, port string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", "", fmt.Errorf("add-ons APIServer %q: %w", s, err)
	}
	if u.Scheme != "https" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", "", "", fmt.Errorf("add-ons APIServer %q: want https://IP:PORT", s)
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return "", "", "", fmt.Errorf("add-ons APIServer %q: the host must be an IP address: %w", s, err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil || p < 1 || p > 65535 {
		return "", "", "", fmt.Errorf("add-ons APIServer %q: want an explicit port 1-65535", s)
	}
	return "https://" + u.Host, ip.String(), strconv.Itoa(p), nil
}

// imageRef is the OCI distribution reference grammar
// (github.com/distribution/reference), with a tag or digest required.
var imageRef = func() *regexp.Regexp {
	const (
		domainComp = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		domain     = domainComp + `(?:\.` + domainComp + `)*(?::[0-9]+)?`
		pathComp   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
		name       = `(?:` + domain + `/)?` + pathComp + `(?:/` + pathComp + `)*`
		tag        = `:[\w][\w.-]{0,127}`
		digest     = `@sha256:[a-f0-9]{64}`
	)
	return regexp.MustCompile(`^` + name + `(?:` + tag + `(?:` + digest + `)?|` + digest + `)$`)
}()

func checkImageRef(ref string) error {
	if ref == "" {
		return fmt.Errorf("no image reference given")
	}
	if len(ref) > 255 || !imageRef.MatchString(ref) {
		return fmt.Errorf("image reference %q: want NAME:TAG or NAME@sha256:DIGEST, such as registry.berth.test/berth/kube-proxy:v1.35.4", ref)
	}
	return nil
}
