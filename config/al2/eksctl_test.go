package al2

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// eksctlDoc is eksctl's AL2 cloud-config as pkg/cloudconfig writes it
// (runcmd, write_files, sigs.k8s.io/yaml's layout), with eksctl's own
// bootstrap.helper.sh and bootstrap.al2.sh, a preBootstrapCommand and a
// kubeletExtraConfig.
const eksctlDoc = "testdata/golden/eksctl.cloud-config"

// TestEksctlGolden: what ReadEksctl makes of eksctl's real shape.
func TestEksctlGolden(t *testing.T) {
	data, err := os.ReadFile(eksctlDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !IsEksctlCloudConfig(data) {
		t.Error("IsEksctlCloudConfig: false")
	}
	e, err := ReadEksctl(data)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(e, "", "  ")
	got = append(got, '\n')
	want := strings.TrimSuffix(eksctlDoc, ".cloud-config") + ".json"
	checkGolden(t, want, got)
	for _, opt := range e.Options.Order {
		if _, ok := Lookup(opt); !ok {
			t.Errorf("option %q is not bootstrap.sh's", opt)
		}
	}
	if len(e.NotRun) != 1 || e.NotRun[0].N != 4 || !strings.HasPrefix(e.NotRun[0].Text, "/bin/bash -c yum install") {
		t.Errorf("not run %+v: want the preBootstrapCommand, line 4", e.NotRun)
	}
}

// TestEksctlDefaults: the helper's defaults (110 pods, dockerd) and an
// empty CLUSTER_DNS, which bootstrap.sh took as unset.
func TestEksctlDefaults(t *testing.T) {
	doc := eksctlWith(t, "CLUSTER_NAME=c\nAPI_SERVER_URL=https://x\nB64_CLUSTER_CA=Zm9v\nNODE_LABELS=\nNODE_TAINTS=\nCLUSTER_DNS=\nFOO=1", "{}")
	e, err := ReadEksctl(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Options.Set["--kubelet-extra-args"]; got != "--max-pods=110" {
		t.Errorf("kubelet extra args %q, want --max-pods=110 alone", got)
	}
	if got := e.Options.Set["--container-runtime"]; got != "dockerd" {
		t.Errorf("container runtime %q, want the helper's default dockerd", got)
	}
	if _, ok := e.Options.Set["--dns-cluster-ip"]; ok || e.KubeletExtra != nil {
		t.Errorf("empty CLUSTER_DNS or {} taken: %+v %s", e.Options.Set, e.KubeletExtra)
	}
	if len(e.Warnings) != 2 || !strings.Contains(e.Warnings[1], "FOO (line ") {
		t.Errorf("warnings %q: want the labels and FOO", e.Warnings)
	}
}

// eksctlWith is eksctlDoc with kubelet.env's and kubelet-extra.json's
// contents replaced.
func eksctlWith(t *testing.T, env, extra string) []byte {
	t.Helper()
	data, err := os.ReadFile(eksctlDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "- content: |-\n    CLUSTER_NAME=")
	j := strings.Index(s, "  path: /etc/eksctl/kubelet.env")
	k := strings.Index(s, "- content: '{\"kubeReserved\"")
	l := strings.Index(s, "  path: /etc/eksctl/kubelet-extra.json")
	if i < 0 || j < i || k < 0 || l < k || k > i {
		t.Fatal("eksctl.cloud-config changed shape")
	}
	block := "- content: |-\n    " + strings.ReplaceAll(env, "\n", "\n    ") + "\n  owner: root:root\n"
	return []byte(s[:k] + "- content: '" + extra + "'\n  owner: root:root\n" + s[l:i] + block + s[j:])
}

// TestEksctlErrors: what berth does not read is refused with the line,
// "eksctl's AL2 user data", and what to do instead.
func TestEksctlErrors(t *testing.T) {
	base, err := os.ReadFile(eksctlDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"override bootstrap command", "#cloud-config\nruncmd:\n- - /bin/bash\n  - -c\n  - /etc/eks/bootstrap.sh c\nwrite_files:\n- path: /etc/eksctl/kubelet.env\n  content: CLUSTER_NAME=c\n", "line 1: eksctl's AL2 user data: no /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh in write_files"},
		{"changed script", strings.Replace(string(base), `/etc/eks/bootstrap.sh "${CLUSTER_NAME}"`, `/etc/eks/bootstrap.sh "${OTHER}"`, 1), "is not eksctl's script"},
		{"quoted value", string(eksctlWith(t, "CLUSTER_NAME=\"c\"", "{}")), `line 15: eksctl's AL2 user data: /etc/eksctl/kubelet.env: CLUSTER_NAME="\"c\"": berth reads plain values only`},
		{"not an assignment", string(eksctlWith(t, "CLUSTER_NAME=c\nexport X", "{}")), `line 16: eksctl's AL2 user data: /etc/eksctl/kubelet.env: "export X" is not a KEY=value line`},
		{"extra not an object", string(eksctlWith(t, "CLUSTER_NAME=c", "[1]")), "line 10: eksctl's AL2 user data: /etc/eksctl/kubelet-extra.json: want a JSON object"},
		{"alias", "#cloud-config\nx: &a [1]\ny: *a\nwrite_files: []\n", "eksctl's AL2 user data: YAML anchors and aliases are not read"},
		{"not run", strings.Replace(string(base), "- - /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh\n", "", 1), "eksctl's AL2 user data: runcmd does not run /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh"},
		{"encoded file", strings.Replace(string(base), "  path: /etc/eksctl/kubelet.env\n", "  path: /etc/eksctl/kubelet.env\n  encoding: b64\n", 1), "write_files encoding \"b64\": berth reads plain text only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadEksctl([]byte(c.doc))
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) || e.Line < 1 {
				t.Errorf("got %v\nwant %q", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), "eksctl's AL2 user data") {
				t.Errorf("%v does not name eksctl's AL2 user data", err)
			}
		})
	}
}

// FuzzReadEksctl: no panic; an error is an *Error with a line in the
// document; what is read is bounded by the document.
func FuzzReadEksctl(f *testing.F) {
	if b, err := os.ReadFile(eksctlDoc); err == nil {
		f.Add(b)
	}
	f.Add([]byte("#cloud-config\nruncmd: [[/var/lib/cloud/scripts/eksctl/bootstrap.al2.sh]]\nwrite_files:\n- {path: /etc/eksctl/kubelet.env, content: \"CLUSTER_NAME=c\"}\n- {path: /var/lib/cloud/scripts/eksctl/bootstrap.al2.sh, content: '/etc/eks/bootstrap.sh \"${CLUSTER_NAME}\"'}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		e, err := ReadEksctl(doc)
		lines := bytes.Count(doc, []byte("\n")) + 1
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.Line < 1 || ae.Line > lines+1 || !strings.Contains(err.Error(), "eksctl's AL2 user data") {
				t.Fatalf("error %v: want an *Error about eksctl's AL2 user data with a line in 1..%d", err, lines)
			}
			return
		}
		for name, v := range e.Options.Set {
			if _, ok := Lookup(name); !ok || len(v) > len(doc)+64 {
				t.Fatalf("option %q = %d bytes", name, len(v))
			}
		}
		if len(e.NotRun) > MaxCloudConfigEntries {
			t.Fatalf("%d not run", len(e.NotRun))
		}
	})
}
