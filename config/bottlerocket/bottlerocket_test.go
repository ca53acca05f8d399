package bottlerocket

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-node/berth/config/fate"
	"github.com/berth-node/berth/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

type goldenCase struct {
	Settings     *Settings `json:"settings"`
	KubeletFlags []string  `json:"kubeletFlags"`
}

// TestGolden reads each document in testdata/golden (what Karpenter,
// eksctl and terraform-aws-eks write for Bottlerocket nodes, and one with
// every setting berth honours and the machine settings it ignores) and
// compares the settings, their problems and the kubelet flags with the
// matching .json.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.toml")
	if err != nil || len(ins) < 4 {
		t.Fatalf("want the 4 documents, found %v %v", ins, err)
	}
	for _, in := range ins {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			if !IsSettings(data) {
				t.Error("IsSettings: false")
			}
			s, err := Read(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			got, err := json.MarshalIndent(goldenCase{s, s.Kubelet.Flags()}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			want := strings.TrimSuffix(in, ".toml") + ".json"
			golden.Check(t, want, got, *update)
		})
	}
}

// TestEveryKeyHasNoErrors: the document with every honoured setting is
// read without an error or a warning.
func TestEveryKeyHasNoErrors(t *testing.T) {
	s := mustRead(t, "testdata/golden/every-key.toml")
	for _, p := range s.Problems {
		t.Errorf("%v", p)
	}
	for _, row := range Table {
		if row.Fate == fate.Honoured && !strings.Contains(row.Key, "<") {
			if !strings.Contains(string(mustFile(t, "testdata/golden/every-key.toml")), lastKey(row.Key)) {
				t.Errorf("every-key.toml does not set %s", row.Key)
			}
		}
	}
}

// rowCase is one Table row exercised: doc is a whole document. For a
// honoured row, want is the JSON of the settings read (without
// problems); for an ignored or refused row, path is the one problem's.
type rowCase struct {
	doc  string
	want string
	path string
}

// rowCases has a case for every row of Table (TestTable fails for a row
// without one).
var rowCases = map[string]rowCase{
	"settings.kubernetes.api-server":                                 {doc: k8s(`api-server = "https://x.example.com"`), want: `{"cluster":{"apiServerEndpoint":"https://x.example.com"}}`},
	"settings.kubernetes.cluster-certificate":                        {doc: k8s(`cluster-certificate = "` + testCA + `"`), want: `{"cluster":{"certificateAuthority":"` + testCA + `"}}`},
	"settings.kubernetes.cluster-name":                               {doc: k8s(`cluster-name = "c_1-x"`), want: `{"cluster":{"name":"c_1-x"}}`},
	"settings.kubernetes.cluster-dns-ip":                             {doc: "[settings.kubernetes]\ncluster-dns-ip = \"10.100.0.10\"\n", want: `{"kubelet":{"config":{"clusterDNS":["10.100.0.10"]}}}`},
	"settings.kubernetes.cluster-domain":                             {doc: k8s(`cluster-domain = "corp.local"`), want: `{"kubelet":{"config":{"clusterDomain":"corp.local"}}}`},
	"settings.kubernetes.max-pods":                                   {doc: k8s(`max-pods = 29`), want: `{"kubelet":{"config":{"maxPods":29}}}`},
	"settings.kubernetes.node-labels":                                {doc: k8s("[settings.kubernetes.node-labels]\n\"a.io/b\" = \"c\""), want: `{"kubelet":{"nodeLabels":{"a.io/b":"c"}}}`},
	"settings.kubernetes.node-taints":                                {doc: k8s("node-taints = {a = [\"b:NoSchedule\", \":NoExecute\"]}"), want: `{"kubelet":{"taints":[{"key":"a","value":"b","effect":"NoSchedule"},{"key":"a","effect":"NoExecute"}]}}`},
	"settings.kubernetes.node-ip":                                    {doc: k8s(`node-ip = "10.1.2.3"`), want: `{"kubelet":{"nodeIP":"10.1.2.3"}}`},
	"settings.kubernetes.hostname-override":                          {doc: k8s(`hostname-override = "node-a"`), want: `{"kubelet":{"hostnameOverride":"node-a"}}`},
	"settings.kubernetes.hostname-override-source":                   {doc: k8s(`hostname-override-source = "instance-id"`), want: `{"featureGates":{"InstanceIdNodeName":true}}`},
	"settings.kubernetes.provider-id":                                {doc: k8s(`provider-id = "aws:///us-west-2a/i-1"`), want: `{"kubelet":{"config":{"providerID":"aws:///us-west-2a/i-1"}}}`},
	"settings.kubernetes.authentication-mode":                        {doc: k8s("authentication-mode = \"aws\""), want: `{}`},
	"settings.kubernetes.bootstrap-token":                            {doc: k8s("authentication-mode = \"tls\"\nbootstrap-token = \"abcdef.0123456789abcdef\""), want: `{"cluster":{"bootstrapToken":"abcdef.0123456789abcdef"}}`},
	"settings.kubernetes.standalone-mode":                            {doc: k8s(`standalone-mode = true`), path: "settings.kubernetes.standalone-mode"},
	"settings.kubernetes.cloud-provider":                             {doc: k8s(`cloud-provider = "external"`), want: `{}`},
	"settings.kubernetes.server-tls-bootstrap":                       {doc: k8s(`server-tls-bootstrap = false`), want: `{"kubelet":{"config":{"serverTLSBootstrap":false}}}`},
	"settings.kubernetes.server-certificate":                         {doc: k8s(`server-certificate = "Zm9v"`), path: "settings.kubernetes.server-certificate"},
	"settings.kubernetes.server-key":                                 {doc: k8s(`server-key = "Zm9v"`), path: "settings.kubernetes.server-key"},
	"settings.kubernetes.credential-providers":                       {doc: k8s("[settings.kubernetes.credential-providers.ecr-credential-provider]\nenabled = true\nimage-patterns = [\"*.dkr.ecr.us-east-2.amazonaws.com\"]"), path: "settings.kubernetes.credential-providers"},
	"settings.kubernetes.static-pods.<name>":                         {doc: k8s("[settings.kubernetes.static-pods.web]\nenabled = true\nmanifest = \"Zm9v\""), path: "settings.kubernetes.static-pods.web"},
	"settings.kubernetes.static-pods-enabled":                        {doc: k8s(`static-pods-enabled = true`), path: "settings.kubernetes.static-pods-enabled"},
	"settings.kubernetes.eviction-hard":                              {doc: k8s(`eviction-hard = {"memory.available" = "100Mi"}`), want: `{"kubelet":{"config":{"evictionHard":{"memory.available":"100Mi"}}}}`},
	"settings.kubernetes.eviction-soft":                              {doc: k8s(`eviction-soft = {"nodefs.inodesFree" = "7.5%"}`), want: `{"kubelet":{"config":{"evictionSoft":{"nodefs.inodesFree":"7.5%"}}}}`},
	"settings.kubernetes.eviction-soft-grace-period":                 {doc: k8s(`eviction-soft-grace-period = {"imagefs.available" = "1m30s"}`), want: `{"kubelet":{"config":{"evictionSoftGracePeriod":{"imagefs.available":"1m30s"}}}}`},
	"settings.kubernetes.eviction-max-pod-grace-period":              {doc: k8s(`eviction-max-pod-grace-period = 0`), want: `{"kubelet":{"config":{"evictionMaxPodGracePeriod":0}}}`},
	"settings.kubernetes.kube-reserved":                              {doc: k8s(`kube-reserved = {cpu = "1", memory = "1.5Gi"}`), want: `{"kubelet":{"config":{"kubeReserved":{"cpu":"1","memory":"1.5Gi"}}}}`},
	"settings.kubernetes.system-reserved":                            {doc: k8s(`system-reserved = {pid = "100", ephemeral-storage = "2G"}`), want: `{"kubelet":{"config":{"systemReserved":{"ephemeral-storage":"2G","pid":"100"}}}}`},
	"settings.kubernetes.reserved-cpus":                              {doc: k8s(`reserved-cpus = "0-1"`), want: `{"kubelet":{"config":{"reservedSystemCPUs":"0-1"}}}`},
	"settings.kubernetes.allowed-unsafe-sysctls":                     {doc: k8s(`allowed-unsafe-sysctls = ["kernel.shm*"]`), want: `{"kubelet":{"config":{"allowedUnsafeSysctls":["kernel.shm*"]}}}`},
	"settings.kubernetes.registry-qps":                               {doc: k8s(`registry-qps = 0`), want: `{"kubelet":{"config":{"registryPullQPS":0}}}`},
	"settings.kubernetes.registry-burst":                             {doc: k8s(`registry-burst = 3`), want: `{"kubelet":{"config":{"registryBurst":3}}}`},
	"settings.kubernetes.event-qps":                                  {doc: k8s(`event-qps = 4`), want: `{"kubelet":{"config":{"eventRecordQPS":4}}}`},
	"settings.kubernetes.event-burst":                                {doc: k8s(`event-burst = 5`), want: `{"kubelet":{"config":{"eventBurst":5}}}`},
	"settings.kubernetes.kube-api-qps":                               {doc: k8s(`kube-api-qps = 6`), want: `{"kubelet":{"config":{"kubeAPIQPS":6}}}`},
	"settings.kubernetes.kube-api-burst":                             {doc: k8s(`kube-api-burst = 7`), want: `{"kubelet":{"config":{"kubeAPIBurst":7}}}`},
	"settings.kubernetes.container-log-max-size":                     {doc: k8s(`container-log-max-size = "10Mi"`), want: `{"kubelet":{"config":{"containerLogMaxSize":"10Mi"}}}`},
	"settings.kubernetes.container-log-max-files":                    {doc: k8s(`container-log-max-files = 8`), want: `{"kubelet":{"config":{"containerLogMaxFiles":8}}}`},
	"settings.kubernetes.container-log-max-workers":                  {doc: k8s(`container-log-max-workers = 2`), want: `{"kubelet":{"config":{"containerLogMaxWorkers":2}}}`},
	"settings.kubernetes.container-log-monitor-interval":             {doc: k8s(`container-log-monitor-interval = "1m"`), want: `{"kubelet":{"config":{"containerLogMonitorInterval":"1m"}}}`},
	"settings.kubernetes.cpu-cfs-quota-enforced":                     {doc: k8s(`cpu-cfs-quota-enforced = false`), want: `{"kubelet":{"config":{"cpuCFSQuota":false}}}`},
	"settings.kubernetes.cpu-manager-policy":                         {doc: k8s(`cpu-manager-policy = "None"`), want: `{"kubelet":{"config":{"cpuManagerPolicy":"none"}}}`},
	"settings.kubernetes.cpu-manager-policy-options":                 {doc: k8s(`cpu-manager-policy-options = ["full-pcpus-only", "strict-cpu-reservation"]`), want: `{"kubelet":{"config":{"cpuManagerPolicyOptions":{"full-pcpus-only":"true","strict-cpu-reservation":"true"}}}}`},
	"settings.kubernetes.cpu-manager-reconcile-period":               {doc: k8s(`cpu-manager-reconcile-period = "1h5m"`), want: `{"kubelet":{"config":{"cpuManagerReconcilePeriod":"1h5m"}}}`},
	"settings.kubernetes.topology-manager-policy":                    {doc: k8s(`topology-manager-policy = "single-numa-node"`), want: `{"kubelet":{"config":{"topologyManagerPolicy":"single-numa-node"}}}`},
	"settings.kubernetes.topology-manager-scope":                     {doc: k8s(`topology-manager-scope = "container"`), want: `{"kubelet":{"config":{"topologyManagerScope":"container"}}}`},
	"settings.kubernetes.memory-manager-policy":                      {doc: k8s(`memory-manager-policy = "none"`), want: `{"kubelet":{"config":{"memoryManagerPolicy":"None"}}}`},
	"settings.kubernetes.memory-manager-reserved-memory.<numa-node>": {doc: k8s("[settings.kubernetes.memory-manager-reserved-memory.1]\nenabled = true\nhugepages-2Mi = \"1Gi\"\n[settings.kubernetes.memory-manager-reserved-memory.0]\nenabled = true\nmemory = \"674Mi\""), want: `{"kubelet":{"config":{"reservedMemory":[{"limits":{"memory":"674Mi"},"numaNode":0},{"limits":{"hugepages-2Mi":"1Gi"},"numaNode":1}]}}}`},
	"settings.kubernetes.pod-pids-limit":                             {doc: k8s(`pod-pids-limit = -1`), want: `{"kubelet":{"config":{"podPidsLimit":-1}}}`},
	"settings.kubernetes.image-gc-high-threshold-percent":            {doc: k8s(`image-gc-high-threshold-percent = "90"`), want: `{"kubelet":{"config":{"imageGCHighThresholdPercent":90}}}`},
	"settings.kubernetes.image-gc-low-threshold-percent":             {doc: k8s(`image-gc-low-threshold-percent = 0`), want: `{"kubelet":{"config":{"imageGCLowThresholdPercent":0}}}`},
	"settings.kubernetes.image-minimum-gc-age":                       {doc: k8s(`image-minimum-gc-age = "5m"`), want: `{"kubelet":{"config":{"imageMinimumGCAge":"5m"}}}`},
	"settings.kubernetes.image-maximum-gc-age":                       {doc: k8s(`image-maximum-gc-age = "24h"`), want: `{"kubelet":{"config":{"imageMaximumGCAge":"24h"}}}`},
	"settings.kubernetes.max-parallel-image-pulls":                   {doc: k8s(`max-parallel-image-pulls = 3`), want: `{"kubelet":{"config":{"serializeImagePulls":false,"maxParallelImagePulls":3}}}`},
	"settings.kubernetes.ids-per-pod":                                {doc: k8s(`ids-per-pod = 131072`), want: `{"kubelet":{"config":{"userNamespaces":{"idsPerPod":131072}}}}`},
	"settings.kubernetes.shutdown-grace-period":                      {doc: k8s(`shutdown-grace-period = "30s"`), want: `{"kubelet":{"config":{"shutdownGracePeriod":"30s"}}}`},
	"settings.kubernetes.shutdown-grace-period-for-critical-pods":    {doc: k8s(`shutdown-grace-period-for-critical-pods = "10s"`), want: `{"kubelet":{"config":{"shutdownGracePeriodCriticalPods":"10s"}}}`},
	"settings.kubernetes.seccomp-default":                            {doc: k8s(`seccomp-default = true`), want: `{"kubelet":{"config":{"seccompDefault":true}}}`},
	"settings.kubernetes.single-process-oom-kill":                    {doc: k8s(`single-process-oom-kill = false`), want: `{"kubelet":{"config":{"singleProcessOOMKill":false}}}`},
	"settings.kubernetes.memory-swap-behavior":                       {doc: k8s(`memory-swap-behavior = "NoSwap"`), want: `{"kubelet":{"config":{"memorySwap":{"swapBehavior":"NoSwap"}}}}`},
	"settings.kubernetes.log-level":                                  {doc: k8s(`log-level = 0`), want: `{"kubelet":{"verbosity":0}}`},
	"settings.kubernetes.device-ownership-from-security-context":     {doc: k8s(`device-ownership-from-security-context = true`), path: "settings.kubernetes.device-ownership-from-security-context"},
	"settings.kubernetes.pod-infra-container-image":                  {doc: k8s(`pod-infra-container-image = "registry.k8s.io/pause:3.9"`), path: "settings.kubernetes.pod-infra-container-image"},

	"settings.autoscaling":                    {doc: "[settings.autoscaling]\nshould-wait = true\n", path: "settings.autoscaling"},
	"settings.aws.region":                     {doc: "[settings.aws]\nregion = \"us-west-2\"\n", path: "settings.aws.region"},
	"settings.aws.config":                     {doc: "[settings.aws]\nconfig = \"W2RlZmF1bHRd\"\n", path: "settings.aws.config"},
	"settings.aws.credentials":                {doc: "[settings.aws]\ncredentials = \"W2RlZmF1bHRd\"\n", path: "settings.aws.credentials"},
	"settings.aws.profile":                    {doc: "[settings.aws]\nprofile = \"roles-anywhere\"\n", path: "settings.aws.profile"},
	"settings.boot":                           {doc: "[settings.boot.kernel-parameters]\n\"console\" = [\"tty0\"]\n", path: "settings.boot"},
	"settings.bootstrap-commands.<name>":      {doc: "[settings.bootstrap-commands.set-motd]\ncommands = [[\"apiclient\", \"set\", \"motd=hi\"]]\nmode = \"once\"\n", path: "settings.bootstrap-commands.set-motd"},
	"settings.bootstrap-containers.<name>":    {doc: "[settings.bootstrap-containers.setup]\nsource = \"public.ecr.aws/x/y:1\"\nmode = \"always\"\nessential = true\n", path: "settings.bootstrap-containers.setup"},
	"settings.cloudformation":                 {doc: "[settings.cloudformation]\nshould-signal = true\nstack-name = \"s\"\nlogical-resource-id = \"ASG\"\n", path: "settings.cloudformation"},
	"settings.container-registry.mirrors":     {doc: "[settings.container-registry.mirrors]\n\"docker.io\" = [\"https://m.example.com\"]\n\"[fd00::1]:5000\" = [\"http://[fd00::1]:5000\"]\n", want: `{"registryMirrors":{"[fd00::1]:5000":["http://[fd00::1]:5000"],"docker.io":["https://m.example.com"]}}`},
	"settings.container-registry.credentials": {doc: "[[settings.container-registry.credentials]]\nregistry = \"docker.io\"\nusername = \"foo\"\npassword = \"hunter2\"\n", path: "settings.container-registry.credentials"},
	"settings.container-runtime":              {doc: "[settings.container-runtime]\nmax-concurrent-downloads = 5\n", path: "settings.container-runtime"},
	"settings.container-runtime-plugins":      {doc: "[settings.container-runtime-plugins.soci-snapshotter]\npull-mode = \"parallel-pull-unpack\"\n", path: "settings.container-runtime-plugins"},
	"settings.dns.name-servers":               {doc: "[settings.dns]\nname-servers = [\"1.2.3.4\", \"5.6.7.8\"]\n", want: `{"instance":{"nameservers":["1.2.3.4","5.6.7.8"]}}`},
	"settings.dns.search-list":                {doc: "[settings.dns]\nsearch-list = [\"foo.bar\", \"baz.foo\"]\n", want: `{"instance":{"searchDomains":["foo.bar","baz.foo"]}}`},
	"settings.ecs":                            {doc: "[settings.ecs]\ncluster = \"c\"\n", path: "settings.ecs"},
	"settings.host-containers.admin":          {doc: "[settings.host-containers.admin]\nenabled = true\nsuperpowered = true\n", path: "settings.host-containers.admin"},
	"settings.host-containers.control":        {doc: "[settings.host-containers.control]\nenabled = true\n", path: "settings.host-containers.control"},
	"settings.host-containers.<name>":         {doc: "[settings.host-containers.agent]\nenabled = true\nsource = \"public.ecr.aws/x/agent:1\"\n", path: "settings.host-containers.agent"},
	"settings.image-verifier-plugins":         {doc: "[settings.image-verifier-plugins]\nenabled = true\n", path: "settings.image-verifier-plugins"},
	"settings.kernel.sysctl":                  {doc: "[settings.kernel.sysctl]\n\"net/ipv4.conf.all/forwarding\" = \"1\"\n\"vm.max_map_count\" = \"262144\"\n", want: `{"instance":{"sysctls":{"net/ipv4.conf.all/forwarding":"1","vm.max_map_count":"262144"}}}`},
	"settings.kernel.modules":                 {doc: "[settings.kernel.modules.udf]\nallowed = true\nautoload = true\n[settings.kernel.modules.sctp]\nallowed = false\n[settings.kernel.modules.dccp]\nallowed = true\n", want: `{"instance":{"kernelModules":["udf"],"blockedModules":["sctp"]}}`},
	"settings.kernel.lockdown":                {doc: "[settings.kernel]\nlockdown = \"integrity\"\n", path: "settings.kernel.lockdown"},
	"settings.kernel.hugepages":               {doc: "[settings.kernel.hugepages.transparent]\nenabled = \"always\"\n", path: "settings.kernel.hugepages"},
	"settings.kernel.drivers":                 {doc: "[settings.kernel.drivers.nvidia]\nbranch = \"lts\"\n", path: "settings.kernel.drivers"},
	"settings.kubelet-device-plugins":         {doc: "[settings.kubelet-device-plugins.nvidia]\npass-device-specs = true\n", path: "settings.kubelet-device-plugins"},
	"settings.kubelet-dra-drivers":            {doc: "[settings.kubelet-dra-drivers.nvidia]\nenabled = true\n", path: "settings.kubelet-dra-drivers"},
	"settings.metrics":                        {doc: "[settings.metrics]\nsend-metrics = false\n", path: "settings.metrics"},
	"settings.motd":                           {doc: "[settings]\nmotd = \"hi\"\n", path: "settings.motd"},
	"settings.network.hostname":               {doc: "[settings.network]\nhostname = \"node-1\"\n", want: `{"instance":{"hostname":"node-1"}}`},
	"settings.network.https-proxy":            {doc: "[settings.network]\nhttps-proxy = \"http://proxy:3128\"\n[settings.kubernetes]\napi-server = \"https://api.example.com\"\ncluster-dns-ip = \"10.0.0.10\"\n", want: `{"cluster":{"apiServerEndpoint":"https://api.example.com"},"kubelet":{"config":{"clusterDNS":["10.0.0.10"]}},"instance":{"environment":{"HTTPS_PROXY":"http://proxy:3128","NO_PROXY":"localhost,127.0.0.1,api.example.com,.cluster.local","https_proxy":"http://proxy:3128","no_proxy":"localhost,127.0.0.1,api.example.com,.cluster.local"}}}`},
	"settings.network.no-proxy":               {doc: "[settings.network]\nno-proxy = [\"10.0.0.0/8\"]\n", want: `{"instance":{"environment":{"NO_PROXY":"10.0.0.0/8,localhost,127.0.0.1,.cluster.local","no_proxy":"10.0.0.0/8,localhost,127.0.0.1,.cluster.local"}}}`},
	"settings.network.hosts":                  {doc: "[settings.network]\nhosts = [[\"10.0.0.1\", [\"a.example.com\"]]]\n", path: "settings.network.hosts"},
	"settings.network.disable-ipv6":           {doc: "[settings.network]\ndisable-ipv6 = [\"eth0\"]\n", path: "settings.network.disable-ipv6"},
	"settings.ntp.time-servers":               {doc: "[settings.ntp]\ntime-servers = [{address = \"169.254.169.123\"}, {address = \"fd00:ec2::123\"}]\n", want: `{"instance":{"timeServers":["169.254.169.123","fd00:ec2::123"]}}`},
	"settings.ntp.options":                    {doc: "[settings.ntp]\noptions = [\"minpoll\", \"1\"]\n", path: "settings.ntp.options"},
	"settings.ntp.logging":                    {doc: "[settings.ntp]\nlogging = [\"tracking\"]\n", path: "settings.ntp.logging"},
	"settings.nvidia-container-runtime":       {doc: "[settings.nvidia-container-runtime]\nvisible-devices-as-volume-mounts = true\n", path: "settings.nvidia-container-runtime"},
	"settings.oci-defaults":                   {doc: "[settings.oci-defaults.capabilities]\nsys-admin = true\n", path: "settings.oci-defaults"},
	"settings.oci-hooks":                      {doc: "[settings.oci-hooks]\nlog4j-hotpatch-enabled = true\n", path: "settings.oci-hooks"},
	"settings.pki":                            {doc: "[settings.pki.my-ca]\ndata = \"Zm9v\"\ntrusted = true\n", path: "settings.pki"},
	"settings.updates.metadata-base-url":      {doc: "[settings.updates]\nmetadata-base-url = \"https://updates.example.com/berth\"\n", want: `{"instance":{"updateRepository":"https://updates.example.com/berth"}}`},
	"settings.updates.targets-base-url":       {doc: "[settings.updates]\ntargets-base-url = \"https://cdn.example.com/targets/\"\n", want: `{"instance":{"updateTargetsURL":"https://cdn.example.com/targets/"}}`},
	"settings.updates.seed":                   {doc: "[settings.updates]\nseed = 1234\n", path: "settings.updates.seed"},
	"settings.updates.version-lock":           {doc: "[settings.updates]\nversion-lock = \"latest\"\n", path: "settings.updates.version-lock"},
	"settings.updates.ignore-waves":           {doc: "[settings.updates]\nignore-waves = true\n", path: "settings.updates.ignore-waves"},
}

// TestTable reads, for each row of Table, a document that sets it:
// honoured gives its value, ignored one warning naming the path, refused
// one error naming the path; nothing else, but the cluster-dns-ip warning
// any settings.kubernetes table without that key gets.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range Table {
		if seen[row.Key] {
			t.Errorf("%s: two rows", row.Key)
		}
		seen[row.Key] = true
		if row.Why == "" || !row.Fate.Valid() {
			t.Errorf("table entry %+v", row)
		}
		if got, ok := Lookup(row.Key); !ok || got != row {
			t.Errorf("Lookup(%q) = %+v, %v", row.Key, got, ok)
		}
		c, ok := rowCases[row.Key]
		if !ok {
			t.Errorf("%s: no test case", row.Key)
			continue
		}
		t.Run(row.Key, func(t *testing.T) {
			s, err := Read([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			ps := withoutDNSWarning(s.Problems, row.Key)
			switch row.Fate {
			case fate.Honoured:
				for _, p := range ps {
					t.Errorf("%v", p)
				}
				s.Problems = nil
				got, _ := json.Marshal(s)
				if string(got) != c.want {
					t.Errorf("got  %s\nwant %s", got, c.want)
				}
			default:
				want := SeverityWarning
				if row.Fate == fate.Refused {
					want = SeverityError
				}
				if len(ps) != 1 || ps[0].Severity != want || ps[0].Path != c.path || ps[0].Unknown || !strings.Contains(ps[0].Message, row.Why) || ps[0].Line < 1 {
					t.Errorf("problems %v\nwant one %s naming %s, with the row's Why", ps, want, c.path)
				}
			}
		})
	}
	for key := range rowCases {
		if !seen[key] {
			t.Errorf("test case %s: no such row", key)
		}
	}
}

// TestAcceptedValues: values that a refused or honoured row accepts
// without a problem, or with a warning.
func TestAcceptedValues(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"standalone-mode false", k8s("standalone-mode = false"), ""},
		{"cloud-provider aws", k8s(`cloud-provider = "aws"`), `warning: line 2: settings.kubernetes.cloud-provider: "aws": berth always runs kubelet with --cloud-provider=external (the in-tree aws provider left Kubernetes in 1.27)`},
		{"disabled static pod", k8s("static-pods = {web = {enabled = false}}"), "warning: line 2: settings.kubernetes.static-pods.web: ignored: not enabled, and berth runs no static pods from user data"},
		{"bootstrap container off", "[settings.bootstrap-containers.x]\nsource = \"a\"\n", `warning: line 1: settings.bootstrap-containers.x: ignored: mode is "off"`},
		{"host container disabled", "[settings.host-containers.agent]\nenabled = false\n", "warning: line 1: settings.host-containers.agent: ignored: not enabled, and berth runs no host containers"},
		{"token without tls", k8s(`bootstrap-token = "abcdef.0123456789abcdef"`), `warning: line 2: settings.kubernetes.bootstrap-token: ignored: authentication-mode is not "tls", so Bottlerocket ignores the token too and berth joins with the EKS exec credential plugin`},
		{"mirror capabilities", "[[settings.container-registry.mirrors]]\nregistry = \"docker.io\"\nendpoint = [\"https://m\"]\ncapabilities = [\"pull\"]\n", "warning: line 4: settings.container-registry.mirrors[0].capabilities: ignored: berth's mirrors pull and resolve, as containerd's hosts.toml does by default"},
		{"ntp object options", "[settings.ntp.time-servers.local]\naddress = \"169.254.169.123\"\noptions = [\"iburst\"]\n", "warning: line 3: settings.ntp.time-servers.local.options: ignored: berth's NTP client takes no chrony options; it asks the address on port 123"},
		{"module allowed and not loaded", "[settings.kernel.modules.sctp]\nallowed = true\nautoload = false\n", ""},
		{"ntp repeated", "[settings.ntp]\ntime-servers = [\"a.example.com\", \"a.example.com\"]\n", "warning: line 2: settings.ntp.time-servers[1]: ignored: \"a.example.com\" is listed already"},
		{"taint as one string", k8s(`node-taints = {a = "b:NoSchedule"}`), ""},
		{"dns ip as an empty list", k8s(`cluster-dns-ip = []`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problemStrings(withoutDNSWarning(s.Problems, "")), "\n")
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestBadValues: a value a setting does not take is an error naming its
// path and line, and saying what the setting wants.
func TestBadValues(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"max-pods string", k8s(`max-pods = "abc"`), `error: line 2: settings.kubernetes.max-pods: want an integer, got "abc"`},
		{"max-pods float", k8s(`max-pods = 58.0`), `error: line 2: settings.kubernetes.max-pods: want an integer, got 58.0`},
		{"element line", "[settings.dns]\nname-servers = [\n  \"1.1.1.1\",\n  \"bad\",\n]\n", `error: line 4: settings.dns.name-servers[1]: "bad" is not an IP address: ParseAddr("bad"): unable to parse IP`},
		{"max-pods too big", k8s(`max-pods = 4294967296`), `error: line 2: settings.kubernetes.max-pods: want an integer from 0 to 2147483647, got 4294967296`},
		{"api-server http", k8s(`api-server = "http://x"`), `error: line 2: settings.kubernetes.api-server: want an https URL (https://HOST[:PORT][/PATH]), got "http://x"`},
		{"certificate not base64", k8s(`cluster-certificate = "!!"`), `error: line 2: settings.kubernetes.cluster-certificate: not base64 (illegal base64 data at input byte 0): want the cluster's CA bundle in PEM, base64-encoded, as DescribeCluster's certificateAuthority.data`},
		{"certificate not PEM", k8s(`cluster-certificate = "Zm9v"`), `error: line 2: settings.kubernetes.cluster-certificate: the base64 decodes to no PEM CERTIFICATE block: want the cluster's CA bundle in PEM, base64-encoded`},
		{"cluster name", k8s(`cluster-name = "-x"`), `error: line 2: settings.kubernetes.cluster-name: want a cluster name (a letter or digit, then up to 99 letters, digits, '-' or '_'), got "-x"`},
		{"dns ip", k8s(`cluster-dns-ip = ["10.0.0.10", "ten"]`), `error: line 2: settings.kubernetes.cluster-dns-ip[1]: "ten" is not an IP address: ParseAddr("ten"): unable to parse IP`},
		{"dns ip table", k8s(`cluster-dns-ip = {a = 1}`), `error: line 2: settings.kubernetes.cluster-dns-ip: want a string or a list of strings, got a table`},
		{"label value", k8s("[settings.kubernetes.node-labels]\n\"a/b\" = \"-bad\""), `error: line 3: settings.kubernetes.node-labels."a/b": "-bad" is not a label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"label number", k8s("[settings.kubernetes.node-labels]\nx = 1"), `error: line 3: settings.kubernetes.node-labels.x: want a string, got 1`},
		{"taint effect", k8s(`node-taints = {a = ["b:Never"]}`), `error: line 2: settings.kubernetes.node-taints.a[0]: "a=b:Never" is not a taint: effect "Never" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{"taint no colon", k8s(`node-taints = {a = ["b"]}`), `error: line 2: settings.kubernetes.node-taints.a[0]: want VALUE:EFFECT (or :EFFECT), got "b"`},
		{"eviction signal", k8s(`eviction-hard = {"memory.free" = "1%"}`), `error: line 2: settings.kubernetes.eviction-hard."memory.free": want one of "memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "pid.available", got "memory.free"`},
		{"eviction threshold", k8s(`eviction-hard = {"memory.available" = "100%"}`), `error: line 2: settings.kubernetes.eviction-hard."memory.available": want a percentage from 0% to below 100%, got "100%"`},
		{"quantity", k8s(`kube-reserved = {cpu = "12ki"}`), `error: line 2: settings.kubernetes.kube-reserved.cpu: want a Kubernetes quantity such as 100m, 512Mi or 1G, got "12ki"`},
		{"duration", k8s(`shutdown-grace-period = "1m2h"`), `error: line 2: settings.kubernetes.shutdown-grace-period: want a duration such as 30s, 5m or 1h30m, got "1m2h"`},
		{"percent", k8s(`image-gc-high-threshold-percent = 101`), `error: line 2: settings.kubernetes.image-gc-high-threshold-percent: want an integer from 0 to 100, got 101`},
		{"bool", k8s(`seccomp-default = "true"`), `error: line 2: settings.kubernetes.seccomp-default: want true or false, got "true"`},
		{"policy", k8s(`cpu-manager-policy = "dynamic"`), `error: line 2: settings.kubernetes.cpu-manager-policy: want one of "static", "none", "Static", "None", got "dynamic"`},
		{"tls without token", k8s(`authentication-mode = "tls"`), `error: line 2: settings.kubernetes.authentication-mode: "tls" joins with a bootstrap token: set settings.kubernetes.bootstrap-token`},
		{"token never quoted", k8s("authentication-mode = \"tls\"\nbootstrap-token = \"abcdef.SECRETSECRETSECRE\""), `error: line 3: settings.kubernetes.bootstrap-token: not a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}`},
		{"numa node", k8s("[settings.kubernetes.memory-manager-reserved-memory.first]\nenabled = true"), `error: line 2: settings.kubernetes.memory-manager-reserved-memory.first: want a NUMA node number as the key, got "first"`},
		{"mirror duplicate", "[[settings.container-registry.mirrors]]\nregistry = \"docker.io\"\nendpoint = [\"https://a\"]\n[[settings.container-registry.mirrors]]\nregistry = \"docker.io\"\nendpoint = [\"https://b\"]\n", `error: line 4: settings.container-registry.mirrors[1]: registry "docker.io" has mirrors already; give each registry once, with all its endpoints`},
		{"mirror endpoints", "[[settings.container-registry.mirrors]]\nregistry = \"docker.io\"\nendpoints = [\"https://a\"]\n", "error: line 1: settings.container-registry.mirrors[0]: no endpoint: want endpoint = [\"https://MIRROR\", ...]\nwarning: line 3: settings.container-registry.mirrors[0].endpoints: not a setting berth knows; ignored (Bottlerocket's key is endpoint)"},
		{"mirror url", "[settings.container-registry.mirrors]\n\"docker.io\" = [\"ftp://m\"]\n", `error: line 2: settings.container-registry.mirrors."docker.io"[0]: "ftp://m" is not a mirror URL: want an http:// or https:// URL`},
		{"mirror empty", "[settings.container-registry.mirrors]\n\"docker.io\" = []\n", `error: line 2: settings.container-registry.mirrors."docker.io": registry "docker.io" has no endpoint: want at least one mirror URL`},
		{"mirror registry", "[settings.container-registry.mirrors]\n\"a b\" = [\"https://m\"]\n", `error: line 2: settings.container-registry.mirrors."a b": "a b" is not a registry host (HOST, HOST:PORT, or "*" for every registry): "a b" is not a DNS name: label "a b" has ' '; only letters, digits and '-' are allowed`},
		{"mirrors string", "[settings.container-registry]\nmirrors = \"x\"\n", `error: line 2: settings.container-registry.mirrors: want a list of tables ([[settings.container-registry.mirrors]]), got "x"`},
		{"sysctl key", "[settings.kernel.sysctl]\n\"../x\" = \"1\"\n", `error: line 2: settings.kernel.sysctl."../x": "../x" is not a sysctl name: want up to 128 of a-z, A-Z, 0-9, '.', '/', '_', '-', not starting or ending with '.' or '/', no ".."`},
		{"sysctl twice", "[settings.kernel.sysctl]\n\"vm.x\" = \"1\"\n\"vm/x\" = \"2\"\n", `error: line 3: settings.kernel.sysctl."vm/x": the same sysctl as "vm.x"`},
		{"sysctl empty", "[settings.kernel.sysctl]\n\"vm.x\" = \"\"\n", `error: line 2: settings.kernel.sysctl."vm.x": empty value: leave the key out to keep the kernel's or berth's`},
		{"sysctl number", "[settings.kernel.sysctl]\n\"vm.max_map_count\" = 262144\n", `error: line 2: settings.kernel.sysctl."vm.max_map_count": want a string, got 262144`},
		{"module both", "[settings.kernel.modules.sctp]\nallowed = false\nautoload = true\n", `error: line 1: settings.kernel.modules.sctp: autoload = true with allowed = false: a module cannot be both loaded and blocked`},
		{"module name", "[settings.kernel.modules.\"a.b\"]\nallowed = false\n", `error: line 1: settings.kernel.modules."a.b": "a.b" is not a kernel module name: want up to 56 of a-z, A-Z, 0-9, '_', '-'`},
		{"hostname", "[settings.network]\nhostname = \"a_b\"\n", `error: line 2: settings.network.hostname: "a_b" is not a hostname: label "a_b" has '_'; only letters, digits and '-' are allowed`},
		{"ntp url", "[settings.ntp]\ntime-servers = [\"https://time.example.com\"]\n", `error: line 2: settings.ntp.time-servers[0]: "https://time.example.com" is not an NTP server: want a hostname or an IP address (label "https://time" has ':'; only letters, digits and '-' are allowed)`},
		{"update url", "[settings.updates]\nmetadata-base-url = \"ftp://updates.example.com\"\n", `error: line 2: settings.updates.metadata-base-url: "ftp://updates.example.com": want an http:// or https:// URL`},
		{"update targets number", "[settings.updates]\ntargets-base-url = 7\n", `error: line 2: settings.updates.targets-base-url: want a string, got 7`},
		{"ntp mixed", "[settings.ntp]\ntime-servers = [\"a.example.com\", {address = \"b.example.com\"}]\n", `error: line 2: settings.ntp.time-servers: mixes server names and tables; use one form`},
		{"ntp no address", "[settings.ntp]\ntime-servers = [{directive = \"pool\"}]\n", "error: line 2: settings.ntp.time-servers[0]: no address: want address = \"HOST\"\nwarning: line 2: settings.ntp.time-servers[0].directive: ignored: berth's NTP client takes no chrony directive; it asks the address on port 123"},
		{"bootstrap mode", "[settings.bootstrap-commands.x]\nmode = \"sometimes\"\n", `error: line 2: settings.bootstrap-commands.x.mode: want one of "off", "once", "always", got "sometimes"`},
		{"namespace not a table", "[settings]\nkubernetes = 1\n", `error: line 2: settings.kubernetes: want a table, got 1`},
		{"proxy", "[settings.network]\nhttps-proxy = \"a b\"\n", `error: line 2: settings.network.https-proxy: want a proxy as HOST[:PORT] or a URL, got "a b"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problemStrings(withoutDNSWarning(s.Problems, "")), "\n")
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !s.HasErrors() {
				t.Error("HasErrors: false")
			}
		})
	}
}

// TestUnknown: a setting no row covers is one warning naming its path,
// marked Unknown, and its value is not looked at.
func TestUnknown(t *testing.T) {
	doc := `top = 1
[settings]
frobnicate = {a = 1}
"kubernetes.max-pods" = 3
[settings.kubernetes]
cluster-dns-ip = "10.0.0.10"
future-setting = "x"
"with space" = 1
[settings.network]
http-proxy = "x"
[settings.kubernetes.memory-manager-reserved-memory.0]
enabled = true
memory = "1Gi"
reserved = "2Gi"
`
	s, err := Read([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"warning: line 1: top: not a setting berth knows; ignored",
		"warning: line 3: settings.frobnicate: not a setting berth knows; ignored",
		`warning: line 4: settings."kubernetes.max-pods": not a setting berth knows; ignored`,
		"warning: line 7: settings.kubernetes.future-setting: not a setting berth knows; ignored",
		`warning: line 8: settings.kubernetes."with space": not a setting berth knows; ignored`,
		"warning: line 10: settings.network.http-proxy: not a setting berth knows; ignored",
		"warning: line 14: settings.kubernetes.memory-manager-reserved-memory.0.reserved: not a setting berth knows; ignored",
	}
	got := problemStrings(s.Problems)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range s.Problems {
		if !p.Unknown {
			t.Errorf("%v: Unknown not set", p)
		}
	}
	if s.HasErrors() || len(s.Kubelet.Config.ReservedMemory) != 1 {
		t.Errorf("errors %v, reserved memory %v", s.HasErrors(), s.Kubelet.Config.ReservedMemory)
	}
}

// TestNotSettings: what cannot be read at all is an *Error with the line
// (and the key, where go-toml names one).
func TestNotSettings(t *testing.T) {
	for _, c := range []struct {
		name, doc, want string
		isSettings      bool
	}{
		{"syntax", "[settings.kubernetes]\nmax-pods = = 3\n", "line 2: not TOML: ", false},
		{"duplicate key", "[settings.kubernetes]\nmax-pods = 3\nmax-pods = 4\n", "line 3: not TOML: key max-pods is already defined", true},
		{"no settings", "[kubernetes]\nmax-pods = 3\n", "no settings table: not Bottlerocket user data", false},
		{"settings not a table", "settings = 3\n", "line 1: settings: want a table, got 3", false},
		{"settings a list of tables", "[[settings]]\nx = 3\n", "line 1: settings: want a table, got a list", false},
		{"yaml", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n", "line 1: not TOML: ", false},
		{"script", "#!/bin/bash\n/etc/eks/bootstrap.sh my-cluster\n", "line 2: not TOML: ", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if IsSettings([]byte(c.doc)) != c.isSettings {
				t.Errorf("IsSettings: %v", !c.isSettings)
			}
			_, err := Read([]byte(c.doc))
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v, want an *Error starting %q", err, c.want)
			}
		})
	}
}

// TestBounds: hostile documents stop at a limit, with an error naming
// the limit, the line and the path.
func TestBounds(t *testing.T) {
	deep := "[settings" + strings.Repeat(".a", MaxDepth) + "]\nx = 1\n"
	inline := "[settings]\nx = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n"
	var many strings.Builder
	many.WriteString("[settings.kubernetes.node-labels]\n")
	for i := range MaxKeys {
		fmt.Fprintf(&many, "k%d = \"v\"\n", i)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"oversize", "[settings]\n#" + strings.Repeat("x", MaxSize), "65548 bytes, more than 65536 (bottlerocket.MaxSize)"},
		{"deep tables", deep, "line 1: settings" + strings.Repeat(".a", MaxDepth) + ": nested more than 10 deep (bottlerocket.MaxDepth)"},
		{"deep lists", inline, "line 2: settings.x[0][0][0][0][0][0][0][0][0]: nested more than 10 deep (bottlerocket.MaxDepth)"},
		{"many keys", many.String(), fmt.Sprintf("line %d: settings.kubernetes.node-labels.k%d: more than 1024 keys and list elements (bottlerocket.MaxKeys)", MaxKeys-1, MaxKeys-3)},
		{"long key", "[settings.kubernetes.node-labels]\n" + strings.Repeat("k", MaxKeyLength+1) + " = \"v\"\n", "line 2: settings.kubernetes.node-labels: a key of 513 bytes, more than 512 (bottlerocket.MaxKeyLength)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read([]byte(c.doc))
			var e *Error
			if !errors.As(err, &e) || err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// TestControlCharacters: a string with a control character is refused
// wherever berth would write it, quoted so that the character shows.
func TestControlCharacters(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"label value", k8s("[settings.kubernetes.node-labels]\na = \"b\\nc\""), `error: line 3: settings.kubernetes.node-labels.a: "b\nc" has a control character (U+000A) at byte 1; control characters and line breaks are not allowed`},
		{"sysctl value", "[settings.kernel.sysctl]\n\"vm.x\" = \"\"\"\n1\nkernel.y = 2\"\"\"\n", `error: line 2: settings.kernel.sysctl."vm.x": "1\nkernel.y = 2" has a control character (U+000A) at byte 1; control characters and line breaks are not allowed`},
		{"provider id", k8s(`provider-id = "aws:///a\u0000"`), `error: line 2: settings.kubernetes.provider-id: "aws:///a\x00" has a control character (U+0000) at byte 8; control characters and line breaks are not allowed`},
		{"line separator", "[settings.dns]\nsearch-list = [\"a.example.com\\u2028nameserver 6.6.6.6\"]\n", `error: line 2: settings.dns.search-list[0]: "a.example.com\u2028nameserver 6.6.6.6" has a control character (U+2028) at byte 13; control characters and line breaks are not allowed`},
		{"label key", k8s("[settings.kubernetes.node-labels]\n\"a\\tb\" = \"c\""), `error: line 3: settings.kubernetes.node-labels."a\tb": "a\tb" is not a label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Read([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problemStrings(withoutDNSWarning(s.Problems, "")), "\n")
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestProblemsCapped: a document full of mistakes gives MaxProblems and
// one line counting the rest.
func TestProblemsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("[settings.kubernetes.node-labels]\n")
	for i := range 80 {
		fmt.Fprintf(&b, "k%03d = %d\n", i, i)
	}
	s, err := Read([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Problems) != MaxProblems+1 {
		t.Fatalf("%d problems", len(s.Problems))
	}
	last := s.Problems[MaxProblems]
	// 80 bad labels and the cluster-dns-ip warning.
	if last.Severity != SeverityError || last.Message != "... and 31 more problems (bottlerocket.MaxProblems)" {
		t.Errorf("last: %v", last)
	}
}

// TestFlagsAndDocument: the kubelet flags and config as nodeconfig takes
// them.
func TestFlagsAndDocument(t *testing.T) {
	s := mustRead(t, "testdata/golden/karpenter.toml")
	want := []string{
		"--node-labels=karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=general-purpose,team=payments",
		"--register-with-taints=dedicated=payments:NoSchedule,karpenter.sh/unregistered:NoExecute",
	}
	if got := s.Kubelet.Flags(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("flags %q\nwant %q", got, want)
	}
	doc, err := s.Kubelet.Config.Document()
	if err != nil {
		t.Fatal(err)
	}
	if string(doc["maxPods"]) != "58" || string(doc["clusterDNS"]) != `["10.100.0.10"]` || len(doc) != 4 {
		t.Errorf("document %s", mustJSON(t, doc))
	}
	if doc, _ := (KubeletConfig{}).Document(); len(doc) != 0 {
		t.Errorf("empty config gives %v", doc)
	}
}

// FuzzRead: any input gives Settings or an *Error, never a panic; an
// error names a line or a path (or is over MaxSize), every problem names
// a path, and the problems are bounded.
func FuzzRead(f *testing.F) {
	ins, _ := filepath.Glob("testdata/golden/*.toml")
	for _, in := range ins {
		f.Add(mustFile(f, in))
	}
	for _, c := range rowCases {
		f.Add([]byte(c.doc))
	}
	f.Add([]byte("[[settings.a]]\n[settings.a.b]\n[[settings.a]]\n[[settings.a.c]]\nx = [[1], {y = 2}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Line < 1 && e.Path == "" && len(data) <= MaxSize && !strings.Contains(e.Msg, "no settings table")) {
				t.Fatalf("error %v: want an *Error naming a line or a path", err)
			}
			return
		}
		if !IsSettings(data) {
			t.Fatal("Read accepted what IsSettings refuses")
		}
		if len(s.Problems) > MaxProblems+1 {
			t.Fatalf("%d problems", len(s.Problems))
		}
		for _, p := range s.Problems {
			if p.Path == "" || len(p.Path) > maxPath+3 || len(p.Message) > maxMessage+3 || (p.Severity != SeverityError && p.Severity != SeverityWarning) {
				t.Fatalf("problem %+v", p)
			}
		}
		for _, f := range s.Kubelet.Flags() {
			if noControl(f) != nil {
				t.Fatalf("flag %q", f)
			}
		}
		if _, err := s.Kubelet.Config.Document(); err != nil {
			t.Fatal(err)
		}
	})
}

// k8s is a document with a settings.kubernetes table holding lines.
func k8s(lines string) string { return "[settings.kubernetes]\n" + lines + "\n" }

// withoutDNSWarning drops the warning for a settings.kubernetes table
// without cluster-dns-ip, unless row is that setting's.
func withoutDNSWarning(ps []Problem, row string) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Path == "settings.kubernetes.cluster-dns-ip" && strings.HasPrefix(p.Message, "not set:") && row != p.Path {
			continue
		}
		out = append(out, p)
	}
	return out
}

func problemStrings(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func lastKey(key string) string { return key[strings.LastIndexByte(key, '.')+1:] }

func mustFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, name string) *Settings {
	t.Helper()
	s, err := Read(mustFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testCA is base64 of a PEM certificate: a self-signed P-256 CA made for
// these tests.
var testCA = strings.TrimSpace(string(must(os.ReadFile("testdata/ca.b64"))))

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestREADMEListsEverySetting: the README's table of Bottlerocket settings
// is Table, row for row, so the two cannot drift.
func TestREADMEListsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../docs/user-data.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := fate.READMERows(readme, "settings.")
	if len(rows) != len(Table) {
		t.Errorf("README has %d setting rows, Table %d", len(rows), len(Table))
	}
	for i, s := range Table {
		want := fate.Row(s.Key, s.Fate, s.Why)
		if i >= len(rows) || rows[i] != want {
			t.Errorf("README row %d: want\n%s", i, want)
		}
	}
}
