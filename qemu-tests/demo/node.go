package main

import (
	"github.com/berth-node/berth/qemu-tests/clusterimages"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// What the demo node is, as QEMU's user network and the IMDS stand-in make
// it: the guest is always 10.0.2.15, and kubelet names the node after the
// instance's private DNS name.
const (
	guestIP  = "10.0.2.15"
	nodeName = "ip-10-0-2-15.us-west-2.compute.internal"
	podName  = "berth-demo"
	// svcName is the ClusterIP Service in front of the demo pod; the pod
	// answers HTTP on svcTargetPort with its hostname.
	svcName       = "berth-demo"
	svcTargetPort = 8080
	// clientPod is the busybox pod that resolves and fetches the Service.
	clientPod  = "dns-client"
	podNS      = "default"
	podGraceS  = 10
	clusterTag = "berth-demo"
)

// nodeConfigYAML is the NodeConfig that joins the node to the local control
// plane. The bootstrap token rides in a berth annotation: EKS nodes
// authenticate with IAM instead, which a local cluster cannot offer. The
// registry mirror annotation sends the node's pulls of registry.berth.test
// to the stand-in at mirror (as the guest dials it).
func nodeConfigYAML(info controlplane.Info, mirror string) string {
	return info.JoinNodeConfigMirrored(clusterTag, clusterimages.MirrorAnnotation(mirror))
}

// mimeUserData wraps the NodeConfig the way eksctl and Karpenter do: MIME
// multipart, with a shell part that berth must skip.
func mimeUserData(nodeConfig string) []byte {
	return []byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n" +
		"--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hello\n\n" +
		"--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" + nodeConfig + "\n--BOUNDARY--\n")
}

// imdsInstance is the instance the IMDS stand-in describes: the defaults,
// with the address QEMU's user network gives the guest.
func imdsInstance() imdsserver.Instance {
	inst := imdsserver.DefaultInstance()
	inst.LocalIPv4 = guestIP
	inst.LocalHostname = nodeName
	return inst
}

// demoPod runs the demo image, which the node pulls from the registry
// stand-in through its mirror, on the demo node; its label is what the
// Service selects.
func demoPod(image string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": podName, "namespace": podNS, "labels": map[string]any{"app": podName}},
		"spec": map[string]any{
			"nodeName":                      nodeName,
			"terminationGracePeriodSeconds": podGraceS,
			"containers": []any{map[string]any{
				"name": "demo", "image": image, "imagePullPolicy": "IfNotPresent",
			}},
		},
	}
}

// demoService is the ClusterIP Service in front of the demo pod.
func demoService() map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": svcName, "namespace": podNS},
		"spec": map[string]any{
			"selector": map[string]any{"app": podName},
			"ports":    []any{map[string]any{"name": "http", "port": 80, "targetPort": svcTargetPort}},
		},
	}
}

// clientScript resolves the kubernetes Service and the demo Service by
// their cluster DNS names with busybox's own nslookup, then fetches the
// demo Service at the address it resolved to (retrying while kube-proxy
// catches up with the new Service), so its log has both addresses and the
// answer. The fetch is a plain HTTP/1.0 request through nc: Debian's
// busybox-static 1.35 wget segfaults on every try (on the host too, for a
// URL with an address), while nc and nslookup work.
const clientScript = `set -e
nslookup kubernetes.default.svc.cluster.local
for i in $(seq 30); do nslookup ` + svcName + `.` + podNS + `.svc.cluster.local > /tmp/ns && break; sleep 1; done
cat /tmp/ns
ip=$(awk '/^Address: /{a=$2} END{print a}' /tmp/ns)
for i in $(seq 60); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$ip" 80 > /tmp/answer && grep -q ' 200 ' /tmp/answer && break; sleep 1; done
echo "answer: $(tail -n 1 /tmp/answer)"
`

// dnsClientPod runs clientScript once in a busybox pod.
func dnsClientPod(busybox string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": clientPod, "namespace": podNS},
		"spec": map[string]any{
			"nodeName":                      nodeName,
			"restartPolicy":                 "Never",
			"terminationGracePeriodSeconds": 1,
			"containers": []any{map[string]any{
				"name": "busybox", "image": busybox, "imagePullPolicy": "IfNotPresent",
				"command": []any{"/bin/sh", "-c", clientScript},
			}},
		},
	}
}
