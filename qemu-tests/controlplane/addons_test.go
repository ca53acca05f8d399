package controlplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// testAddons are the add-ons as the QEMU tests apply them.
func testAddons() Addons {
	return Addons{
		InstallCNIImage: "registry.berth.test/berth/install-cni:v1.7.1",
		KubeProxyImage:  "registry.berth.test/berth/kube-proxy:v1.35.4",
		CoreDNSImage:    "registry.berth.test/berth/coredns:v1.12.4",
		APIServer:       "https://10.0.2.2:40123",
		ClusterCIDR:     DefaultClusterCIDR,
		ServiceCIDR:     DefaultServiceCIDR,
	}
}

// TestAddonsGolden pins every rendered object: a changed manifest shows up
// as a diff to review.
func TestAddonsGolden(t *testing.T) {
	objs, err := renderAddons(testAddons())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o.Body)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString("--- # POST " + o.Path + "\n")
		got.Write(b)
	}
	golden := filepath.Join("testdata", "addons.golden.yaml")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s (go test -update creates it): %v", golden, err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("rendered add-ons differ from %s (go test -update to accept):\n%s", golden, got.String())
	}
}

// strict decodes an object into its typed API struct, refusing unknown
// fields, so a misspelt or misplaced field in a template fails here rather
// than being dropped by the API server.
func strict(t *testing.T, o object, into any) {
	t.Helper()
	b, err := json.Marshal(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s %v: %v", o.Body["kind"], o.Body["metadata"], err)
	}
}

// TestAddonObjects decodes every object into its API type and checks what
// the cluster depends on: where each goes, the install-cni contract,
// kube-proxy's configuration, and kube-dns at the cluster DNS address.
func TestAddonObjects(t *testing.T) {
	a := testAddons()
	objs, err := renderAddons(a)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]object{}
	for _, o := range objs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name, Namespace string }
		}
		b, _ := json.Marshal(o.Body)
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.APIVersion == "" || meta.Kind == "" || meta.Metadata.Name == "" {
			t.Errorf("object without apiVersion, kind or name: %s", b)
		}
		cluster := meta.Kind == "ClusterRole" || meta.Kind == "ClusterRoleBinding"
		if !cluster && meta.Metadata.Namespace != "kube-system" {
			t.Errorf("%s %s in namespace %q, want kube-system", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace)
		}
		if !strings.HasSuffix(o.Path, "/"+strings.ToLower(meta.Kind)+"s") {
			t.Errorf("%s %s POSTed to %s", meta.Kind, meta.Metadata.Name, o.Path)
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := byKey[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		byKey[key] = o
		switch meta.Kind {
		case "ServiceAccount":
			strict(t, o, &corev1.ServiceAccount{})
		case "ConfigMap":
			strict(t, o, &corev1.ConfigMap{})
		case "Service":
			strict(t, o, &corev1.Service{})
		case "ClusterRole":
			strict(t, o, &rbacv1.ClusterRole{})
		case "ClusterRoleBinding":
			var crb rbacv1.ClusterRoleBinding
			strict(t, o, &crb)
			for _, s := range crb.Subjects {
				if s.Kind != "ServiceAccount" || s.Namespace != "kube-system" {
					t.Errorf("ClusterRoleBinding %s: subject %+v", crb.Name, s)
				}
			}
		case "DaemonSet":
			strict(t, o, &appsv1.DaemonSet{})
		case "Deployment":
			strict(t, o, &appsv1.Deployment{})
		default:
			t.Errorf("unexpected kind %s", meta.Kind)
		}
	}
	for _, want := range []string{
		"ServiceAccount/install-cni", "ClusterRole/berth:install-cni", "ClusterRoleBinding/berth:install-cni", "DaemonSet/install-cni",
		"ServiceAccount/kube-proxy", "ClusterRoleBinding/kubeadm:node-proxier", "ConfigMap/kube-proxy", "DaemonSet/kube-proxy",
		"ServiceAccount/coredns", "ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns", "ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns",
	} {
		if _, ok := byKey[want]; !ok {
			t.Errorf("%s not rendered", want)
		}
	}
	// A workload must come after the service account it runs as.
	pos := map[string]int{}
	for i, o := range objs {
		pos[o.Body["kind"].(string)+"/"+o.Body["metadata"].(map[string]any)["name"].(string)] = i
	}
	for w, sa := range map[string]string{"DaemonSet/install-cni": "install-cni", "DaemonSet/kube-proxy": "kube-proxy", "Deployment/coredns": "coredns"} {
		if pos[w] < pos["ServiceAccount/"+sa] {
			t.Errorf("%s is created before its service account %s", w, sa)
		}
	}

	var cni appsv1.DaemonSet
	strict(t, byKey["DaemonSet/install-cni"], &cni)
	checkNodeDaemonSet(t, &cni, a.InstallCNIImage, "install-cni")
	c := cni.Spec.Template.Spec.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "/install-cni" {
		t.Errorf("install-cni command %v", c.Command)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["NODE_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("install-cni NODE_NAME %+v, want the downward API's spec.nodeName", e)
	}
	if env["KUBERNETES_SERVICE_HOST"].Value != "10.0.2.2" || env["KUBERNETES_SERVICE_PORT"].Value != "40123" {
		t.Errorf("install-cni API server env %+v %+v, want 10.0.2.2 40123", env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"])
	}
	mounts := hostMounts(&cni)
	if mounts["/host/opt/cni/bin"] != "/opt/cni/bin" || mounts["/host/etc/cni/net.d"] != "/etc/cni/net.d" {
		t.Errorf("install-cni host mounts %v", mounts)
	}
	if cni.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		t.Errorf("install-cni update strategy %q", cni.Spec.UpdateStrategy.Type)
	}

	var kp appsv1.DaemonSet
	strict(t, byKey["DaemonSet/kube-proxy"], &kp)
	checkNodeDaemonSet(t, &kp, a.KubeProxyImage, "kube-proxy")
	c = kp.Spec.Template.Spec.Containers[0]
	if got := strings.Join(c.Command, " "); got != "/usr/local/bin/kube-proxy --config=/var/lib/kube-proxy/config.conf --hostname-override=$(NODE_NAME)" {
		t.Errorf("kube-proxy command %q", got)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("kube-proxy is not privileged: it sets sysctls and iptables rules")
	}
	mounts = hostMounts(&kp)
	if mounts["/run/xtables.lock"] != "/run/xtables.lock" || mounts["/lib/modules"] != "/lib/modules" {
		t.Errorf("kube-proxy host mounts %v", mounts)
	}
	for _, v := range kp.Spec.Template.Spec.Volumes {
		if v.Name == "xtables-lock" && (v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathFileOrCreate) {
			t.Errorf("xtables.lock hostPath type %v, want FileOrCreate", v.HostPath.Type)
		}
	}
	var kpcm corev1.ConfigMap
	strict(t, byKey["ConfigMap/kube-proxy"], &kpcm)
	var kpc kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict([]byte(kpcm.Data["config.conf"]), &kpc); err != nil {
		t.Fatalf("kube-proxy config.conf: %v\n%s", err, kpcm.Data["config.conf"])
	}
	if kpc.Kind != "KubeProxyConfiguration" || kpc.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" || kpc.Mode != "iptables" ||
		kpc.ClusterCIDR != a.ClusterCIDR || kpc.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" {
		t.Errorf("kube-proxy configuration %+v", kpc)
	}
	if kpc.Conntrack.MaxPerCore != nil || kpc.Conntrack.Min != nil {
		t.Errorf("kube-proxy conntrack %+v: left to the defaults, so it sets nf_conntrack_max as on a real node", kpc.Conntrack)
	}
	var kc clientcmdv1.Config
	if err := yaml.UnmarshalStrict([]byte(kpcm.Data["kubeconfig.conf"]), &kc); err != nil {
		t.Fatalf("kube-proxy kubeconfig.conf: %v", err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != a.APIServer ||
		kc.Clusters[0].Cluster.CertificateAuthority != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" ||
		len(kc.AuthInfos) != 1 || kc.AuthInfos[0].AuthInfo.TokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("kube-proxy kubeconfig %+v", kc)
	}

	var dep appsv1.Deployment
	strict(t, byKey["Deployment/coredns"], &dep)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("coredns replicas %v, want the default 1", dep.Spec.Replicas)
	}
	if dep.Spec.Template.Labels["k8s-app"] != "kube-dns" || dep.Spec.Template.Spec.Containers[0].Image != a.CoreDNSImage {
		t.Errorf("coredns pod labels %v image %s", dep.Spec.Template.Labels, dep.Spec.Template.Spec.Containers[0].Image)
	}
	c = dep.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" || c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
		t.Errorf("coredns probes %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["readiness-probe"] != 8181 || ports["liveness-probe"] != 8080 {
		t.Errorf("coredns probe ports %v, want readiness 8181 and liveness 8080", ports)
	}
	var corefile corev1.ConfigMap
	strict(t, byKey["ConfigMap/coredns"], &corefile)
	for _, want := range []string{"kubernetes cluster.local in-addr.arpa ip6.arpa {", "forward . /etc/resolv.conf", "ready", "lameduck 5s", "prometheus :9153"} {
		if !strings.Contains(corefile.Data["Corefile"], want) {
			t.Errorf("Corefile lacks %q:\n%s", want, corefile.Data["Corefile"])
		}
	}
	var svc corev1.Service
	strict(t, byKey["Service/kube-dns"], &svc)
	if svc.Spec.ClusterIP != "10.96.0.10" || svc.Spec.Selector["k8s-app"] != "kube-dns" {
		t.Errorf("kube-dns clusterIP %s selector %v", svc.Spec.ClusterIP, svc.Spec.Selector)
	}
	var sp []string
	for _, p := range svc.Spec.Ports {
		sp = append(sp, string(p.Protocol)+"/"+p.TargetPort.String())
	}
	if got := strings.Join(sp, " "); got != "UDP/53 TCP/53 TCP/9153" {
		t.Errorf("kube-dns ports %s", got)
	}

	a.CoreDNSReplicas = 2
	objs, err = renderAddons(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Body["kind"] == "Deployment" {
			strict(t, o, &dep)
			if *dep.Spec.Replicas != 2 {
				t.Errorf("CoreDNSReplicas 2 rendered %d replicas", *dep.Spec.Replicas)
			}
		}
	}
}

// checkNodeDaemonSet checks what a node agent needs: it runs on the host's
// network on every node, NotReady ones included, and is scheduled first.
func checkNodeDaemonSet(t *testing.T, ds *appsv1.DaemonSet, image, sa string) {
	t.Helper()
	s := ds.Spec.Template.Spec
	if !s.HostNetwork || s.PriorityClassName != "system-node-critical" || s.ServiceAccountName != sa {
		t.Errorf("DaemonSet %s: hostNetwork %v priorityClassName %q serviceAccountName %q", ds.Name, s.HostNetwork, s.PriorityClassName, s.ServiceAccountName)
	}
	if len(s.Tolerations) != 1 || s.Tolerations[0].Operator != corev1.TolerationOpExists || s.Tolerations[0].Key != "" {
		t.Errorf("DaemonSet %s: tolerations %+v, want one operator: Exists (it must run on a NotReady node)", ds.Name, s.Tolerations)
	}
	if len(s.Containers) != 1 || s.Containers[0].Image != image {
		t.Errorf("DaemonSet %s: containers %+v, want one with image %s", ds.Name, s.Containers, image)
	}
	sel := ds.Spec.Selector.MatchLabels
	for k, v := range sel {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("DaemonSet %s: selector %v does not match the pod labels %v", ds.Name, sel, ds.Spec.Template.Labels)
		}
	}
}

// hostMounts maps each container mount path backed by a hostPath volume to
// the host path.
func hostMounts(ds *appsv1.DaemonSet) map[string]string {
	host := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			host[v.Name] = v.HostPath.Path
		}
	}
	out := map[string]string{}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		if p, ok := host[m.Name]; ok {
			out[m.MountPath] = p
		}
	}
	return out
}

// TestAddonsDNSIP: kube-dns's address is the one berth's kubelet
// configuration hands pods for the same service CIDR.
func TestAddonsDNSIP(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.96.0.0/12":   "10.96.0.10",
		"172.20.0.0/16":  "172.20.0.10",
		"10.100.0.0/16":  "10.100.0.10",
		"192.168.7.0/24": "192.168.7.10",
		"100.64.0.0/10":  "100.64.0.10",
	} {
		a := testAddons()
		a.ServiceCIDR = cidr
		v, err := a.resolve()
		if err != nil {
			t.Errorf("%s: %v", cidr, err)
			continue
		}
		if v.DNSIP != want {
			t.Errorf("%s: DNS IP %s, want %s", cidr, v.DNSIP, want)
		}
	}
	a := testAddons()
	a.DNSIP = "10.96.0.53"
	if v, err := a.resolve(); err != nil || v.DNSIP != "10.96.0.53" {
		t.Errorf("an explicit DNSIP: %s %v", v.DNSIP, err)
	}
}

// TestAddonsRefused: each bad field is refused, naming the field and value.
func TestAddonsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Addons)
		want string
	}{
		{"no CNI image", func(a *Addons) { a.InstallCNIImage = "" }, "InstallCNIImage: no image reference"},
		{"image without tag", func(a *Addons) { a.CoreDNSImage = "registry.berth.test/berth/coredns" }, `CoreDNSImage: image reference "registry.berth.test/berth/coredns"`},
		{"image upper case path", func(a *Addons) { a.InstallCNIImage = "registry.berth.test/Berth/install-cni:v1" }, "InstallCNIImage"},
		{"image with space", func(a *Addons) { a.InstallCNIImage = "registry.berth.test/berth/install-cni:v1 x" }, "InstallCNIImage"},
		{"image injecting YAML", func(a *Addons) { a.KubeProxyImage = "k:v1\n        securityContext: {}" }, "KubeProxyImage"},
		{"image with empty path component", func(a *Addons) { a.CoreDNSImage = "registry.berth.test//coredns:v1" }, "CoreDNSImage"},
		{"image short digest", func(a *Addons) { a.CoreDNSImage = "coredns@sha256:abc" }, "CoreDNSImage"},
		{"bad cluster CIDR", func(a *Addons) { a.ClusterCIDR = "10.244.0.0/33" }, `ClusterCIDR "10.244.0.0/33"`},
		{"no service CIDR", func(a *Addons) { a.ServiceCIDR = "" }, `ServiceCIDR ""`},
		{"IPv6 service CIDR", func(a *Addons) { a.ServiceCIDR = "fd00::/108" }, `ServiceCIDR "fd00::/108"`},
		{"overlapping CIDRs", func(a *Addons) { a.ClusterCIDR = "10.96.0.0/16" }, "overlap"},
		{"service CIDR too small for .10", func(a *Addons) { a.ServiceCIDR = "10.96.0.0/29" }, "DNSIP 10.96.0.10: not a free address of ServiceCIDR 10.96.0.0/29"},
		{"DNS IP outside", func(a *Addons) { a.DNSIP = "10.0.0.10" }, "not a free address"},
		{"DNS IP is the kubernetes Service's", func(a *Addons) { a.DNSIP = "10.96.0.1" }, "not a free address"},
		{"DNS IP not an address", func(a *Addons) { a.DNSIP = "dns" }, `DNSIP "dns"`},
		{"API server http", func(a *Addons) { a.APIServer = "http://10.0.2.2:6443" }, "want https://IP:PORT"},
		{"API server host name", func(a *Addons) { a.APIServer = "https://kubernetes:6443" }, "must be an IP address"},
		{"API server without port", func(a *Addons) { a.APIServer = "https://10.0.2.2" }, "explicit port"},
		{"API server with path", func(a *Addons) { a.APIServer = "https://10.0.2.2:6443/api" }, "want https://IP:PORT"},
		{"API server empty", func(a *Addons) { a.APIServer = "" }, `APIServer ""`},
		{"negative replicas", func(a *Addons) { a.CoreDNSReplicas = -1 }, "CoreDNSReplicas -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testAddons()
			tc.edit(&a)
			_, err := renderAddons(a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestImageRefAccepted(t *testing.T) {
	for _, ref := range []string{
		"registry.berth.test/berth/busybox:1.37.0",
		"10.0.2.2:5000/berth/demo:v1",
		"busybox:latest",
		"public.ecr.aws/eks/coredns:v1.11.4-eksbuild.2",
		"registry.k8s.io/kube-proxy:v1.35.4@sha256:" + strings.Repeat("a", 64),
		"quay.io/a__b/c-d.e:tag_1",
	} {
		if err := checkImageRef(ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
}

func TestCollectionPath(t *testing.T) {
	for _, tc := range []struct {
		body map[string]any
		want string // a path, or the error's start
	}{
		{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "namespace": "kube-system"}}, "/api/v1/namespaces/kube-system/configmaps"},
		{map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": map[string]any{"name": "x", "namespace": "ns"}}, "/apis/apps/v1/namespaces/ns/daemonsets"},
		{map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "x"}}, "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
		{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}, "object ConfigMap x: metadata.namespace is required"},
		{map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "x", "namespace": "ns"}}, "object ClusterRole x: cluster-scoped"},
		{map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "x", "namespace": "ns"}}, "object Pod x: kind not known"},
		{map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}, "object ConfigMap \"x\": apiVersion, kind and metadata.name are required"},
		{map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}, "object ConfigMap \"\": apiVersion"},
	} {
		got, err := collectionPath(tc.body)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.body, got, tc.want)
		}
	}
}

// FuzzAddons: whatever the images and addresses, rendering either refuses
// them or yields the same objects with each value where it belongs, and
// nowhere a value could add fields.
func FuzzAddons(f *testing.F) {
	a := testAddons()
	f.Add(a.KubeProxyImage, a.APIServer, a.ClusterCIDR, a.ServiceCIDR)
	f.Add("k:v1\n  x: y", "https://10.0.2.2:1/", "10.244.0.0/16", "10.96.0.0/12")
	f.Add(`a:"b"`, "https://[::1]:6443", "10.0.0.0/8", "192.168.0.0/16")
	f.Add("a:b", "https://1.2.3.4:65535", "1.2.3.4/32", "5.6.7.0/24")
	want, err := renderAddons(a)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, image, apiServer, clusterCIDR, serviceCIDR string) {
		b := testAddons()
		b.KubeProxyImage, b.APIServer, b.ClusterCIDR, b.ServiceCIDR = image, apiServer, clusterCIDR, serviceCIDR
		objs, err := renderAddons(b)
		if err != nil {
			return
		}
		if len(objs) != len(want) {
			t.Fatalf("%d objects, want %d", len(objs), len(want))
		}
		for i, o := range objs {
			if o.Path != want[i].Path {
				t.Fatalf("object %d at %s, want %s", i, o.Path, want[i].Path)
			}
			if o.Body["kind"] == "DaemonSet" && o.Body["metadata"].(map[string]any)["name"] == "kube-proxy" {
				var ds appsv1.DaemonSet
				strict(t, o, &ds)
				if got := ds.Spec.Template.Spec.Containers[0].Image; got != image {
					t.Fatalf("kube-proxy image %q, want %q", got, image)
				}
			}
			if o.Body["kind"] == "ConfigMap" && o.Body["metadata"].(map[string]any)["name"] == "kube-proxy" {
				var cm corev1.ConfigMap
				strict(t, o, &cm)
				var kc clientcmdv1.Config
				if err := yaml.UnmarshalStrict([]byte(cm.Data["kubeconfig.conf"]), &kc); err != nil {
					t.Fatalf("kubeconfig.conf: %v", err)
				}
				if !strings.HasPrefix(kc.Clusters[0].Cluster.Server, "https://") {
					t.Fatalf("kube-proxy server %q", kc.Clusters[0].Cluster.Server)
				}
				var kpc kubeproxyv1alpha1.KubeProxyConfiguration
				if err := yaml.UnmarshalStrict([]byte(cm.Data["config.conf"]), &kpc); err != nil {
					t.Fatalf("config.conf: %v", err)
				}
			}
		}
	})
}

// TestAddonsCNIOnly: with no kube-proxy or CoreDNS image, only the CNI
// installer's objects are made (the node tests' cluster).
func TestAddonsCNIOnly(t *testing.T) {
	a := testAddons()
	a.KubeProxyImage, a.CoreDNSImage = "", ""
	objs, err := renderAddons(a)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		md := o.Body["metadata"].(map[string]any)
		names = append(names, fmt.Sprintf("%s/%s", o.Body["kind"], md["name"]))
	}
	for _, n := range names {
		if strings.Contains(n, "kube-proxy") || strings.Contains(n, "coredns") || strings.Contains(n, "kube-dns") {
			t.Errorf("CNI-only add-ons made %s: %v", n, names)
		}
	}
	if !slices.Contains(names, "DaemonSet/install-cni") {
		t.Errorf("CNI-only add-ons: no install-cni DaemonSet in %v", names)
	}
}

// TestAddonsFlannel: with flannel's images the CNI is flannel's upstream
// manifest, changed only where renderFlannel says (its images and its pod
// network), and install-cni is left out.
func TestAddonsFlannel(t *testing.T) {
	a := testAddons()
	a.InstallCNIImage = ""
	a.FlannelImage = "registry.berth.test/berth/flannel:v0.28.10"
	a.FlannelCNIPluginImage = "registry.berth.test/berth/flannel-cni-plugin:v1.9.1-flannel1"
	a.ClusterCIDR = "10.250.0.0/16"
	objs, err := renderAddons(a)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := addonTemplates.ReadFile("addons/kube-flannel.yml")
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := splitObjects("kube-flannel.yml", raw)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]object{}
	for _, o := range objs {
		byKey[key(o)] = o
	}
	if _, ok := byKey["DaemonSet/install-cni"]; ok {
		t.Error("install-cni rendered beside flannel")
	}
	for _, want := range []string{"DaemonSet/kube-proxy", "Deployment/coredns"} {
		if _, ok := byKey[want]; !ok {
			t.Errorf("%s missing with flannel as the CNI", want)
		}
	}
	if len(upstream) != 6 {
		t.Fatalf("flannel's manifest has %d objects, want 6 (Namespace, ClusterRole, ClusterRoleBinding, ServiceAccount, ConfigMap, DaemonSet)", len(upstream))
	}
	for i, up := range upstream {
		got, ok := byKey[key(up)]
		if !ok {
			t.Errorf("flannel's %s not rendered", key(up))
			continue
		}
		if objs[i].Path != up.Path || key(objs[i]) != key(up) {
			t.Errorf("object %d is %s, want flannel's %s first, in its order", i, key(objs[i]), key(up))
		}
		// What upstream's object becomes with the two edits, field by
		// field; every other byte must be upstream's.
		want := up.Body
		switch key(up) {
		case "ConfigMap/kube-flannel-cfg":
			data := want["data"].(map[string]any)
			data["net-conf.json"] = strings.Replace(data["net-conf.json"].(string), `"10.244.0.0/16"`, `"10.250.0.0/16"`, 1)
		case "DaemonSet/kube-flannel-ds":
			spec := want["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			inits := spec["initContainers"].([]any)
			inits[0].(map[string]any)["image"] = a.FlannelCNIPluginImage
			inits[1].(map[string]any)["image"] = a.FlannelImage
			spec["containers"].([]any)[0].(map[string]any)["image"] = a.FlannelImage
		}
		gb, _ := json.Marshal(got.Body)
		wb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) {
			t.Errorf("%s differs from upstream's beyond the images and network:\ngot  %s\nwant %s", key(up), gb, wb)
		}
	}
	var ds appsv1.DaemonSet
	strict(t, byKey["DaemonSet/kube-flannel-ds"], &ds)
	var cm corev1.ConfigMap
	strict(t, byKey["ConfigMap/kube-flannel-cfg"], &cm)
	var net struct {
		Network string
		Backend struct{ Type string }
	}
	if err := json.Unmarshal([]byte(cm.Data["net-conf.json"]), &net); err != nil || net.Network != "10.250.0.0/16" || net.Backend.Type != "vxlan" {
		t.Errorf("net-conf.json %q (%v): want Network 10.250.0.0/16 with the vxlan back end", cm.Data["net-conf.json"], err)
	}
	if byKey["Namespace/kube-flannel"].Path != "/api/v1/namespaces" {
		t.Errorf("Namespace kube-flannel goes to %q", byKey["Namespace/kube-flannel"].Path)
	}

	for _, tc := range []struct {
		name string
		edit func(*Addons)
		want string
	}{
		{"plugin image missing", func(a *Addons) { a.FlannelCNIPluginImage = "" }, "FlannelCNIPluginImage"},
		{"flannel image missing", func(a *Addons) { a.FlannelImage = "" }, "FlannelImage"},
		{"two CNIs", func(a *Addons) { a.InstallCNIImage = "registry.berth.test/berth/install-cni:v1.7.1" }, "one CNI"},
	} {
		b := a
		tc.edit(&b)
		if _, err := renderAddons(b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// key is an object's Kind/name.
func key(o object) string {
	return fmt.Sprintf("%s/%s", o.Body["kind"], o.Body["metadata"].(map[string]any)["name"])
}
