package qemutests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-node/berth/qemu-tests/qemu"
	"github.com/berth-node/berth/qemu-tests/vcluster"
	"github.com/berth-node/berth/qemu-tests/vnet"
	"github.com/berth-node/berth/rollout/api/v1alpha1"
	"github.com/berth-node/berth/rollout/decide"
	"github.com/berth-node/berth/update/nodeapi"
	"k8s.io/apimachinery/pkg/api/meta"
)

// rolloutWorkload is the Deployment that must keep serving through a
// rollout: two replicas of the demo server (baked into the node image),
// spread over the nodes, ready only when they answer, slow to stop as a
// server draining its connections is; a PodDisruptionBudget that keeps
// one of them up; and a NodePort Service in front.
const rolloutWorkload = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 20
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: {matchLabels: {app: web}}
      containers:
        - name: demo
          image: localhost/berth-demo:v1
          imagePullPolicy: Never
          env: [{name: DEMO_STOP_DELAY, value: 5s}]
          readinessProbe:
            httpGet: {path: /, port: 8080}
            periodSeconds: 2
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`

// TestRollout rolls releases across two berth nodes with the rollout
// controller (rollout/), deployed in the cluster from its own manifests
// and image, as a user deploys it. The nodes boot from the signed disk
// (OVMF, Secure Boot, A/B slots) on the virtual network, with flannel and
// kube-proxy; a reboot is QEMU exiting, and the test powers the machine
// on again, as the hardware would. The cluster is checked first as
// TestCluster checks its own (it runs only in make test-cluster): no CNI
// until flannel's DaemonSet writes one, flannel's subnet and vxlan,
// kube-proxy's rules, each kubelet through the gateway, the clock from
// the network's time server (node-a's RTC is an hour behind), node to
// node, the outside refused; and last, node-b's power is cut for good
// (nodeFailure).
//   - 1.0.0 to 1.0.1 over both nodes: never more than one node
//     unavailable; a Deployment with a PodDisruptionBudget (minAvailable
//     1) keeps serving through its NodePort Service, which the host polls
//     the whole time through the nodes, as a load balancer would. Mid-
//     rollout, once the first node is told to update, the leading
//     controller replica is killed (SIGKILL in the guest: its Lease is not
//     given back); the other takes the Lease and resumes from the status.
//     Each node stages 1.0.1 once. The first node's 1.0.1 trial boot is
//     made to look hung (a soft lockup in its kernel's log, as a real
//     one hung a node here on CI): the test resets it from outside, as
//     EC2's reboot on a failed status check would, the reset spends a
//     try, and 1.0.1 boots on trial again and is blessed.
//   - 1.0.1 to 1.0.2, whose kubelet never starts: the first node's trial
//     fails, it rolls back to 1.0.1 by itself, the rollout stops there
//     with the node and the reason in its status and an Event, the node
//     is uncordoned, and the other node is never touched.
func TestRollout(t *testing.T) {
	releases := updateTestDir(t)
	dirA, dirB, dirC := filepath.Join(releases, "1.0.0"), filepath.Join(releases, "1.0.1"), filepath.Join(releases, "1.0.2")
	tc := startRigControlPlane(t, clusterOptions{noCNI: true})
	if err := tc.images.Require("kube-proxy.tar", "flannel.tar", "berth-rollout.tar"); err != nil {
		t.Fatal(err)
	}
	a := api{c: tc.Client(), base: tc.Info().HostEndpoint}
	r := startUpdateRepo(t)
	repoSvc := vnet.Service{Name: "update repository", Virtual: vcluster.Virtual(r.host), Host: r.host}
	// The UKIs seal the command line production has: no berth.imds (DMI
	// says EC2).
	const cmdline = "console=ttyS0 quiet berth.onfail=halt berth.debugshell=ttyS1"
	// B's trial deadline has room for a loaded host; C's is short, as its
	// kubelet never starts.
	const trialSoak, deadline, deadlineC = 10 * time.Second, 8 * time.Minute, time.Minute
	nc := rigNodeConfig(t, tc)
	if !strings.Contains(nc, "  annotations:\n") {
		t.Fatalf("the rig's NodeConfig has no annotations to add the update's to:\n%s", nc)
	}
	// node-b mounts an instance-store disk, for the node failure at the
	// end (nodeFailure).
	count := rolloutNodes(t)
	ncs := []string{nc, nc + nodeBFailureConfig}
	for len(ncs) < count {
		ncs = append(ncs, nc)
	}
	userData := func(i int, deadline time.Duration) []byte {
		return mimeUserData(strings.Replace(ncs[i], "  annotations:\n", fmt.Sprintf("  annotations:\n    berth.dev/update-repository: http://%s\n    berth.dev/update-trial-soak: %s\n    berth.dev/update-trial-ready-deadline: %s\n",
			repoSvc.Virtual, trialSoak, deadline), 1))
	}
	img, res := testDiskWith(t, dirA, cmdline)
	vars := enrolledVars(t, qemu.ImageManifest(t, dirA).Arch, img)
	specs := make([]vcluster.NodeSpec, count)
	boots := make([]vcluster.Boot, count)
	for i := range specs {
		specs[i] = vcluster.NodeSpec{UserData: userData(i, deadline)}
		// A node runs from its first boot to its next update, or to the end.
		boots[i] = vcluster.Boot{Timeout: 40 * time.Minute, Disk: &vcluster.DiskBoot{Path: copyDisk(t, img, res.Layout.Size()+8<<30), Vars: vars}}
	}
	// node-a's RTC is an hour behind at every power-on, so each boot's
	// clock step proves the time came from the network's server
	// (clusterReach).
	boots[0].RTCBehind = time.Hour
	boots[1].Disks = []qemu.Disk{nodeBStore(t)}
	r.publish(t, dirA, cmdline)
	r.publish(t, dirB, cmdline)
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	rig, nodes := bootRigSpecs(t, tc, specs, boots, repoSvc)
	pw := &powerSupply{t: t, rig: rig, nodes: nodes, dir: qemu.ImageDir(t), boots: map[string][]*qemu.VM{}, resets: map[string]int{}, realHang: map[*qemu.VM]bool{}}
	for _, nd := range nodes {
		pw.boots[nd.name] = []*qemu.VM{nd.vm}
	}

	// The cluster as TestCluster checks it without its workloads: no CNI
	// until flannel's DaemonSet, then flannel and kube-proxy on each
	// node, the kubelets, the time server and each other reached, the
	// outside refused.
	podCIDRs := waitNoCNI(t, a, nodes)
	tc.applyAddons(t, addonChoice{flannel: true, kubeProxy: true})
	clusterNetwork(t, tc, a, nodes, podCIDRs, since)
	for _, nd := range nodes {
		waitUpdateState(t, nd.vm, a, nd.nodeName, nodeapi.StateIdle, joinTimeout)
	}
	figure(t, "rollout: QEMU start to %d disk-booted nodes Ready with flannel and kube-proxy: %.0f s", count, since())
	clusterReach(t, a, rig.Net, nodes)

	// The controller, from its manifests, with the image make
	// rollout-image built; a round every 5 s (the default 10 s would do,
	// only slower).
	deploy := filepath.Join("..", "rollout", "deploy")
	mustKubectl(t, tc, kubectlTimeout, nil, "apply", "-f", filepath.Join(deploy, "crd.yaml"))
	mustKubectl(t, tc, kubectlTimeout, nil, "wait", "--for=condition=Established", "crd/updates.updates.berth.dev", "--timeout=60s")
	raw, err := os.ReadFile(filepath.Join(deploy, "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := string(raw)
	for old, new := range map[string]string{
		"image: berth-rollout:latest":        "image: " + tc.images.Rollout,
		"args: [--lease-name=berth-rollout]": "args: [--lease-name=berth-rollout, --poll=5s]",
	} {
		if !strings.Contains(manifest, old) {
			t.Fatalf("controller.yaml has no %q to replace", old)
		}
		manifest = strings.Replace(manifest, old, new, 1)
	}
	mustKubectl(t, tc, kubectlTimeout, strings.NewReader(manifest), "apply", "-f", "-")
	mustKubectl(t, tc, kubectlTimeout, strings.NewReader(rolloutWorkload), "apply", "-f", "-")
	for _, d := range [][2]string{{"berth-system", "deployment/berth-rollout"}, {"default", "deployment/web"}} {
		mustKubectl(t, tc, clusterTimeout+time.Minute, nil, "-n", d[0], "rollout", "status", d[1], "--timeout="+clusterTimeout.String())
	}
	figure(t, "rollout: the controller and the workload running: %.0f s after QEMU start", time.Since(start).Seconds())

	var svc struct {
		Spec struct {
			Ports []struct {
				NodePort int `json:"nodePort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	if err := a.do("GET", "/api/v1/namespaces/default/services/web", nil, &svc); err != nil || len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service web: %v %+v", err, svc)
	}
	poller := pollService(rig.Net, nodes, svc.Spec.Ports[0].NodePort)
	defer poller.stop()
	poller.waitFirst(t, 2*time.Minute)

	// 1.0.0 to 1.0.1.
	rollStart := time.Now()
	createUpdate(t, tc, "to-1.0.1", "1.0.1")
	var killed, hung string
	u := pw.follow(t, a, "to-1.0.1", 30*time.Minute, func(u v1alpha1.Update) {
		if killed == "" && slices.ContainsFunc(u.Status.Nodes, func(n v1alpha1.NodeStatus) bool { return n.State == v1alpha1.NodeUpdating }) {
			killed = killLeader(t, a, nodes)
		}
		if hung == "" {
			hung = pw.hangOnTrial(t, "1.0.1")
		}
	})
	took := time.Since(rollStart)
	gap, polls, failed := poller.result()
	figure(t, "rollout: %d nodes 1.0.0 to 1.0.1: %.0f s (soak %s, trial soak %s, the leader killed mid-way, %s reset on its trial boot); the Service's longest gap %.1f s, %d of %d polls unanswered",
		count, took.Seconds(), rolloutSoak, trialSoak, hung, gap.Seconds(), failed, polls)
	if u.Status.Phase != v1alpha1.PhaseCompleted || int(u.Status.Done) != count {
		t.Fatalf("Update to-1.0.1 ended %s with %d/%d done: %+v", u.Status.Phase, u.Status.Done, u.Status.Total, u.Status)
	}
	if killed == "" {
		t.Error("no controller replica was killed mid-rollout")
	}
	// The hung trial boot was reset once, which spent one of 1.0.1's
	// tries: the next boot tried 1.0.1 again, and it was blessed there.
	if hung == "" {
		t.Error("no node's 1.0.1 trial boot was made to hang")
	} else if n, trials := pw.resets[hung]-pw.realResets(hung), pw.count(hung, regexp.MustCompile(`update state version=1\.0\.1 slot=b .*trial=true`)); n != 1 || trials != 2 {
		t.Errorf("%s, hung on its 1.0.1 trial: reset %d times (besides any real hangs), %d boots on trial of 1.0.1; want reset once, and 1.0.1 tried again", hung, n, trials)
	}
	// minAvailable 1 keeps a backend ready throughout: the Service is
	// never without one for longer than kube-proxy takes to follow the
	// endpoints.
	if gap > 30*time.Second {
		t.Errorf("the Service went unanswered for %.1f s in a row during the rollout: a PodDisruptionBudget of minAvailable 1 allows no outage", gap.Seconds())
	}
	if max := pw.maxUnavailable; max > 1 {
		t.Errorf("%d nodes were unavailable at once, want at most 1 (maxUnavailable 1)", max)
	}
	for _, nd := range nodes {
		ann, err := nodeAnnotations(a, nd.nodeName)
		if err != nil {
			t.Fatal(err)
		}
		if ann[nodeapi.AnnotationVersion] != "1.0.1" || ann[nodeapi.AnnotationSlot] != "b" || ann[decide.AnnotationRollout] != "" || ann[nodeapi.AnnotationUpdateTo] != "" {
			t.Errorf("%s after the rollout to 1.0.1: %v, want on 1.0.1 from slot b, released", nd.name, ann)
		}
		if n := pw.count(nd.name, regexp.MustCompile(`update staged: the next boot tries it .*to=1\.0\.1 `)); n != 1 {
			t.Errorf("%s staged 1.0.1 %d times, want once (the new leader must not ask again)", nd.name, n)
		}
		waitUncordoned(t, a, nd)
	}

	// 1.0.1 to 1.0.2, which never becomes Ready.
	r.publish(t, dirC, cmdline)
	for i, vn := range rig.Nodes {
		if err := vn.IMDS.SetUserData(userData(i, deadlineC)); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]map[string]string{}
	for _, nd := range nodes {
		before[nd.name], _ = nodeAnnotations(a, nd.nodeName)
	}
	stopStart := time.Now()
	createUpdate(t, tc, "to-1.0.2", "1.0.2")
	// Power is lost right at the commit on the node told first: QEMU
	// killed as soon as the UKI's rename is logged, before berth records
	// it or reboots in order. The rename was synced, so the next boot
	// tries 1.0.2 all the same.
	var cut string
	u = pw.follow(t, a, "to-1.0.2", 20*time.Minute, func(u v1alpha1.Update) {
		i := slices.IndexFunc(u.Status.Nodes, func(n v1alpha1.NodeStatus) bool { return n.State == v1alpha1.NodeUpdating })
		if cut != "" || i < 0 {
			return
		}
		nd := nodes[slices.IndexFunc(nodes, func(nd *rigNode) bool { return nd.nodeName == u.Status.Nodes[i].Name })]
		if _, err := nd.vm.Expect(regexp.MustCompile(`update staged: the next boot tries it.*to=1\.0\.2`), 10*time.Minute); err != nil {
			t.Fatalf("%s did not stage 1.0.2: %v", nd.name, err)
		}
		if nd.vm.Exited() {
			t.Fatalf("%s rebooted before the power cut at 1.0.2's commit", nd.name)
		}
		if err := nd.vm.Close(); err != nil {
			t.Fatal(err)
		}
		cut = nd.name
		t.Logf("cut %s's power at 1.0.2's commit", nd.name)
	})
	figure(t, "rollout: 1.0.2 (never Ready) to the rollout stopped on its rollback: %.0f s", time.Since(stopStart).Seconds())
	if u.Status.Phase != v1alpha1.PhaseStopped {
		t.Fatalf("Update to-1.0.2 ended %s, want Stopped: %+v", u.Status.Phase, u.Status)
	}
	var failedNode string
	var others []string
	for _, n := range u.Status.Nodes {
		switch n.State {
		case v1alpha1.NodeFailed:
			failedNode = n.Name
			if !strings.Contains(n.Message, "kubelet not Ready") {
				t.Errorf("the failed node's message %q: want the agent's reason (kubelet not Ready)", n.Message)
			}
		case v1alpha1.NodePending:
			others = append(others, n.Name)
		}
	}
	if failedNode == "" || len(others) != count-1 {
		t.Fatalf("Update to-1.0.2's nodes %+v: want one failed, the others pending", u.Status.Nodes)
	}
	if c := meta.FindStatusCondition(u.Status.Conditions, v1alpha1.ConditionStopped); c == nil || c.Reason != decide.ReasonRolledBack || !strings.Contains(c.Message, failedNode) {
		t.Errorf("Stopped condition %+v: want reason %s naming %s", c, decide.ReasonRolledBack, failedNode)
	}
	// The controller writes the status first, then acts in the same
	// round (the release, then the Event): the Event can come seconds
	// after the Stopped status under load.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(3 * time.Second) {
		out := mustKubectl(t, tc, kubectlTimeout, nil, "get", "events", "-n", "default", "--field-selector", "involvedObject.name=to-1.0.2", "-o", "custom-columns=REASON:.reason,MESSAGE:.message")
		if strings.Contains(out, decide.ReasonRolledBack) && strings.Contains(out, failedNode) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the Update's Events a minute after it stopped:\n%s\nwant a %s Event naming %s", out, decide.ReasonRolledBack, failedNode)
			break
		}
	}
	// The failed trial says so on the Node before its reboot, and the
	// rollout stops on that: the node comes back on 1.0.1 after.
	for _, nd := range nodes {
		if nd.nodeName == failedNode {
			pw.waitNode(t, a, nd, "back on 1.0.1 from slot b, Ready, saying 1.0.2 rolled back", 10*time.Minute, func(ann map[string]string, ready bool) bool {
				return ready && ann[nodeapi.AnnotationVersion] == "1.0.1" && ann[nodeapi.AnnotationSlot] == "b" && ann[nodeapi.AnnotationState] == nodeapi.StateRolledBack
			})
		}
	}
	for _, nd := range nodes {
		waitUncordoned(t, a, nd)
		ann, _ := nodeAnnotations(a, nd.nodeName)
		switch {
		case nd.nodeName == failedNode:
			if nd.name != cut {
				t.Errorf("%s failed, but the power was cut on %s", nd.name, cut)
			}
			if ann[nodeapi.AnnotationState] != nodeapi.StateRolledBack || ann[nodeapi.AnnotationVersion] != "1.0.1" {
				t.Errorf("%s after 1.0.2's rollback: %v, want rolled-back, on 1.0.1", nd.name, ann)
			}
			for re, want := range map[string]int{
				`update state version=1\.0\.2 slot=a slot_by=hash boot=systemd-boot entry=berth-1\.0\.2\+2-1\.efi trial=true`: 1,
				`trial failed; rebooting into the previous version`:                                                           1,
				`update state version=1\.0\.1 slot=b .*trial=false`:                                                           1,
			} {
				if n := pw.count(nd.name, regexp.MustCompile(re)); n != want {
					t.Errorf("%s: %d console lines matching %q over its boots, want %d", nd.name, n, re, want)
				}
			}
		case slices.Contains(others, nd.nodeName):
			if n := pw.count(nd.name, regexp.MustCompile(`update to 1\.0\.2|to=1\.0\.2`)); n > 0 || ann[nodeapi.AnnotationState] != before[nd.name][nodeapi.AnnotationState] || ann[nodeapi.AnnotationUpdateTo] != "" {
				t.Errorf("%s, which the stopped rollout must not touch: %d console lines about 1.0.2, annotations %v (before: %v)", nd.name, n, ann, before[nd.name])
			}
		}
	}
	// Stopped is final: rounds later, nothing has moved.
	time.Sleep(15 * time.Second)
	if u2 := getUpdate(t, a, "to-1.0.2"); u2.Status.Phase != v1alpha1.PhaseStopped || slices.ContainsFunc(u2.Status.Nodes, func(n v1alpha1.NodeStatus) bool {
		return slices.Contains(others, n.Name) && n.State != v1alpha1.NodePending
	}) {
		t.Errorf("the stopped Update moved on: %+v", u2.Status)
	}
	figure(t, "rollout: boots per node over both Updates: %v", pw.bootCounts())

	// Last, as it takes node-b down for good.
	t.Run("node failure", func(t *testing.T) { nodeFailure(t, tc, a, nodes[0], nodes[1]) })
}

// rolloutNodes is how many nodes TestRollout rolls: 2, or
// BERTH_ROLLOUT_NODES (2 to 5) for a run by hand; make test's two cores
// hold two guests and the control plane.
func rolloutNodes(t *testing.T) int {
	t.Helper()
	v := os.Getenv("BERTH_ROLLOUT_NODES")
	if v == "" {
		return 2
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 || n > 5 {
		t.Fatalf("BERTH_ROLLOUT_NODES=%q: want a number of nodes from 2 to 5", v)
	}
	return n
}

// powerSupply powers a rig node on again when it reboots (QEMU exits on
// a guest reboot), and watches how many nodes are out at once.
type powerSupply struct {
	t     *testing.T
	rig   *vcluster.Rig
	nodes []*rigNode
	dir   string
	// boots are each node's QEMU runs, by node name, in order.
	boots          map[string][]*qemu.VM
	maxUnavailable int
	// resets is how many of a node's boots hung and were reset.
	resets map[string]int
	// faked is the boot hangOnTrial made look hung; realHang the boots
	// whose kernel hung by itself, which count leaves out.
	faked    *qemu.VM
	realHang map[*qemu.VM]bool
}

// restart starts every node whose QEMU has exited again, from its disk,
// and resets a node whose kernel hung (resetRigNode), twice in a test at
// most.
func (p *powerSupply) restart() {
	p.t.Helper()
	for i, nd := range p.nodes {
		// A kernel that panicked on its soft lockup (softlockup_panic)
		// has exited already; it counts as a reset all the same.
		if err := nd.vm.Stalled(); err != nil {
			total := 0
			for _, n := range p.resets {
				total += n
			}
			if total >= 2 {
				p.t.Fatalf("%s: %v; the third hung kernel in this test is no accident: not reset", nd.name, err)
			}
			p.resets[nd.name]++
			if nd.vm != p.faked {
				p.realHang[nd.vm] = true
			}
			runs := p.boots[nd.name]
			nd.vm = resetRigNode(p.t, p.rig, i, nd, err, fmt.Sprintf("%s-%d", nd.name, len(runs)+1))
			p.boots[nd.name] = append(runs, nd.vm)
			continue
		}
		if !nd.vm.Exited() {
			continue
		}
		runs := p.boots[nd.name]
		if len(runs) >= 6+p.resets[nd.name] {
			p.t.Fatalf("%s rebooted %d times: a node updated once boots twice, one rolled back three times\n%s", nd.name, len(runs), nd.vm.ConsoleTail(40))
		}
		cfg, err := p.rig.QEMUConfig(p.dir, i, nd.boot)
		if err != nil {
			p.t.Fatal(err)
		}
		cfg.Name = fmt.Sprintf("%s-%d", nd.name, len(runs)+1)
		p.t.Logf("%s rebooted: powering it on again as %s", nd.name, cfg.Name)
		nd.vm = qemu.Start(p.t, cfg)
		p.boots[nd.name] = append(runs, nd.vm)
	}
}

// hangOnTrial makes the first node it finds on a trial boot of version
// look hung to the harness, as a node's kernel hung on CI: the
// soft-lockup watchdog's words, written at a critical level into the
// kernel's log, reach the console as a real lockup's do, and restart
// resets the machine. It returns that node's name, or "" while no node
// is on that trial yet.
func (p *powerSupply) hangOnTrial(t *testing.T, version string) string {
	t.Helper()
	trial := regexp.MustCompile(`update state version=` + regexp.QuoteMeta(version) + ` .*trial=true`)
	for _, nd := range p.nodes {
		if nd.vm.Exited() || nd.vm.Stalled() != nil || !slices.ContainsFunc(nd.vm.Lines(), func(l qemu.Line) bool { return trial.MatchString(l.Text) }) {
			continue
		}
		const lockup = "watchdog: BUG: soft lockup - CPU#0 stuck for 61s! [rollout-test:1]"
		// The shell's wait for its prompt ends on the line it wrote.
		if _, err := nd.vm.Shell("echo '<2>"+lockup+"' >/dev/kmsg", time.Minute); err != nil && !errors.Is(err, qemu.ErrGuestStalled) {
			t.Fatalf("%s: writing a soft lockup into the kernel's log: %v", nd.name, err)
		}
		p.faked = nd.vm
		for deadline := time.Now().Add(time.Minute); nd.vm.Stalled() == nil; time.Sleep(time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: a soft lockup of 61 s in the kernel's log did not read as a hung kernel in a minute\n%s", nd.name, nd.vm.ConsoleTail(20))
			}
		}
		return nd.name
	}
	return ""
}

// waitNode waits until ok holds of nd's annotations and Ready, powering
// nodes on as they reboot.
func (p *powerSupply) waitNode(t *testing.T, a api, nd *rigNode, what string, timeout time.Duration, ok func(ann map[string]string, ready bool) bool) {
	t.Helper()
	var ann map[string]string
	for deadline := time.Now().Add(timeout); ; time.Sleep(3 * time.Second) {
		p.restart()
		var err error
		if ann, err = nodeAnnotations(a, nd.nodeName); err == nil && ok(ann, nodeReady(a, nd.nodeName)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not %s within %s: annotations %v (%v)\n%s", nd.name, what, timeout, ann, err, nd.vm.ConsoleTail(30))
		}
	}
}

// count is how many console lines of node's runs match re, leaving out
// the runs whose kernel hung by itself (not hangOnTrial's): what such a
// run cut short comes again in the run after, as on a real node reset by
// EC2, and a count of lines berth writes once per update must not fail on
// a hang the test survived.
func (p *powerSupply) count(node string, re *regexp.Regexp) int {
	n := 0
	for _, vm := range p.boots[node] {
		if p.realHang[vm] {
			continue
		}
		for _, l := range vm.Lines() {
			if re.MatchString(l.Text) {
				n++
			}
		}
	}
	return n
}

// realResets is how many of node's runs hung by themselves.
func (p *powerSupply) realResets(node string) int {
	n := 0
	for _, vm := range p.boots[node] {
		if p.realHang[vm] {
			n++
		}
	}
	return n
}

func (p *powerSupply) bootCounts() map[string]int {
	out := map[string]int{}
	for n, runs := range p.boots {
		out[n] = len(runs)
	}
	return out
}

// follow waits until Update name is finished (Completed, or Stopped with
// no node in flight), powering nodes on as they reboot and counting the
// nodes out (cordoned or not Ready) each round; each is called with the
// Update at each round.
func (p *powerSupply) follow(t *testing.T, a api, name string, timeout time.Duration, each func(v1alpha1.Update)) v1alpha1.Update {
	t.Helper()
	var u v1alpha1.Update
	last := ""
	for deadline := time.Now().Add(timeout); ; time.Sleep(3 * time.Second) {
		p.restart()
		u = getUpdate(t, a, name)
		out := 0
		for _, nd := range p.nodes {
			if cordoned(t, a, nd.nodeName) || !nodeReady(a, nd.nodeName) {
				out++
			}
		}
		p.maxUnavailable = max(p.maxUnavailable, out)
		var where []string
		for _, n := range u.Status.Nodes {
			where = append(where, n.Name+"="+string(n.State)+": "+n.Message)
		}
		if now := fmt.Sprintf("%s %d/%d %v", u.Status.Phase, u.Status.Done, u.Status.Total, where); now != last {
			t.Logf("Update %s: %s", name, now)
			last = now
		}
		if each != nil {
			each(u)
		}
		if decide.Finished(&u) {
			return u
		}
		if time.Now().After(deadline) {
			for _, nd := range p.nodes {
				t.Logf("%s console:\n%s", nd.name, nd.vm.ConsoleTail(30))
			}
			t.Fatalf("Update %s not finished within %s: %s", name, timeout, last)
		}
	}
}

// killLeader kills the leading controller replica's process with SIGKILL
// in its node, as the kernel's OOM killer or a crash would: the Lease is
// not given back, and the other replica must wait it out and take over.
// It returns the killed replica's name. The Lease can name a replica that
// is already gone (evicted from a node being drained, its successor not
// yet leading): it reads the Lease again until a holder's process is
// found, for up to a minute.
func killLeader(t *testing.T, a api, nodes []*rigNode) string {
	t.Helper()
	try := func() (leader, where, out string, err error) {
		var lease struct {
			Spec struct {
				HolderIdentity string `json:"holderIdentity"`
			} `json:"spec"`
		}
		if err := a.do("GET", "/apis/coordination.k8s.io/v1/namespaces/berth-system/leases/berth-rollout", nil, &lease); err != nil || lease.Spec.HolderIdentity == "" {
			return "", "", "", fmt.Errorf("the rollout controller's Lease: %v %+v", err, lease)
		}
		leader = lease.Spec.HolderIdentity
		var pod struct {
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
		}
		if err := a.do("GET", "/api/v1/namespaces/berth-system/pods/"+leader, nil, &pod); err != nil {
			return leader, "", "", fmt.Errorf("the leader's pod %s: %w", leader, err)
		}
		i := slices.IndexFunc(nodes, func(nd *rigNode) bool { return nd.nodeName == pod.Spec.NodeName })
		if i < 0 {
			return leader, "", "", fmt.Errorf("the leader %s runs on %q, not a rig node", leader, pod.Spec.NodeName)
		}
		out, err = nodes[i].vm.Shell(fmt.Sprintf(`for p in $(pidof berth-rollout); do if tr '\0' '\n' < /proc/$p/environ | grep -qx 'POD_NAME=%s'; then kill -9 $p && echo killed $p; fi; done`, leader), shellTimeout)
		if err == nil && !strings.Contains(out, "killed") {
			err = fmt.Errorf("no berth-rollout process of %s on %s", leader, nodes[i].name)
		}
		return leader, nodes[i].name, out, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(3 * time.Second) {
		leader, where, out, err := try()
		if err == nil {
			t.Logf("killed the leading controller replica %s on %s: %s", leader, where, strings.TrimSpace(lastLine(out)))
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("killing the leading controller replica: %v\n%s", err, out)
		}
		t.Logf("killing the leading controller replica: %v; reading the Lease again", err)
	}
}

// rolloutSoak is the Updates' soak: short, as the test's nodes run
// nothing that would fail late.
const rolloutSoak = 10 * time.Second

func createUpdate(t *testing.T, tc *testCluster, name, version string) {
	t.Helper()
	mustKubectl(t, tc, kubectlTimeout, strings.NewReader(fmt.Sprintf(`apiVersion: updates.berth.dev/v1alpha1
kind: Update
metadata: {name: %s}
spec:
  version: %s
  soak: %s
  drainTimeout: 5m
  nodeTimeout: 15m
`, name, version, rolloutSoak)), "apply", "-f", "-")
}

func getUpdate(t *testing.T, a api, name string) v1alpha1.Update {
	t.Helper()
	var u v1alpha1.Update
	if err := a.do("GET", "/apis/updates.berth.dev/v1alpha1/updates/"+name, nil, &u); err != nil {
		t.Fatalf("reading Update %s: %v", name, err)
	}
	return u
}

// waitUncordoned waits for the controller to give nd back: it writes the
// status first and releases the node right after.
func waitUncordoned(t *testing.T, a api, nd *rigNode) {
	t.Helper()
	waitFor(t, nd.vm, nd.name+" uncordoned", 30*time.Second, func() (bool, string) {
		return !cordoned(t, a, nd.nodeName), "cordoned"
	})
}

func cordoned(t *testing.T, a api, node string) bool {
	t.Helper()
	o, err := getNode(a, node)
	if err != nil {
		t.Fatalf("reading node %s: %v", node, err)
	}
	return o.Spec.Unschedulable
}

func nodeReady(a api, node string) bool {
	o, err := getNode(a, node)
	if err != nil {
		return false
	}
	for _, cd := range o.Status.Conditions {
		if cd.Type == "Ready" {
			return cd.Status == "True"
		}
	}
	return false
}

func mustKubectl(t *testing.T, tc *testCluster, timeout time.Duration, stdin io.Reader, args ...string) string {
	t.Helper()
	out, err := kubectlIn(t, tc.Cluster, timeout, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// servicePoller asks the Service through the nodes' NodePort every
// second, as a load balancer in front of the nodes does: each poll tries
// the nodes in turn until one answers from a web pod.
type servicePoller struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	first  chan struct{}
	polls  int
	failed int
	last   time.Time
	gap    time.Duration
}

func pollService(n *vnet.Network, nodes []*rigNode, nodePort int) *servicePoller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &servicePoller{cancel: cancel, first: make(chan struct{})}
	ask := func(ip string) bool {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		c, err := n.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(nodePort)))
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			return false
		}
		b, _ := io.ReadAll(c)
		return strings.Contains(string(b), "200 OK") && strings.Contains(string(b), "hello from berth demo pod web-")
	}
	p.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			ok := false
			for j := range nodes {
				if ok = ask(nodes[(i+j)%len(nodes)].ip); ok {
					break
				}
			}
			now := time.Now()
			p.mu.Lock()
			if p.last.IsZero() {
				if ok {
					p.last = now
					close(p.first)
				}
			} else {
				p.polls++
				if ok {
					p.gap = max(p.gap, now.Sub(p.last))
					p.last = now
				} else {
					p.failed++
				}
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	})
	return p
}

func (p *servicePoller) waitFirst(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.first:
	case <-time.After(timeout):
		t.Fatalf("the Service never answered through the nodes' NodePort within %s", timeout)
	}
}

// result is the longest time between two answered polls, and the polls
// made and unanswered since the first answer.
func (p *servicePoller) result() (gap time.Duration, polls, failed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.gap, time.Since(p.last)), p.polls, p.failed
}

func (p *servicePoller) stop() {
	p.cancel()
	p.wg.Wait()
}
