package main

import (
	"fmt"

	"github.com/berth-node/berth/plan"
	"github.com/berth-node/berth/qemu-tests/controlplane"
	"github.com/berth-node/berth/qemu-tests/imdsserver"
)

// What the demo node is, as QEMU's user network and the IMDS stand-in make
// it: the guest is always 10.0.2.15, and kubelet names the node after the
// instance's private DNS name.
const (
	guestIP    = "10.0.2.15"
	nodeName   = "ip-10-0-2-15.us-west-2.compute.internal"
	demoImage  = "localhost/berth-demo:v1"
	podName    = "berth-demo"
	podNS      = "default"
	podGraceS  = 10
	clusterTag = "berth-demo"
)

// nodeConfigYAML is the NodeConfig that joins the node to the local control
// plane. The bootstrap token rides in a berth annotation: EKS nodes
// authenticate with IAM instead, which a local cluster cannot offer.
func nodeConfigYAML(info controlplane.Info) string {
	return fmt.Sprintf(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  annotations:
    %s: %s
spec:
  cluster:
    name: %s
    apiServerEndpoint: %s
    certificateAuthority: %s
    cidr: %s
`, plan.BootstrapTokenAnnotation, info.BootstrapToken, clusterTag, info.APIServerEndpoint, info.CertificateAuthority, info.ServiceCIDR)
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

// demoPod runs the demo image, which the test image carries (hence Never:
// the node cannot pull), on the demo node.
func demoPod() map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": podName, "namespace": podNS},
		"spec": map[string]any{
			"nodeName":                      nodeName,
			"terminationGracePeriodSeconds": podGraceS,
			"containers": []any{map[string]any{
				"name": "demo", "image": demoImage, "imagePullPolicy": "Never",
			}},
		},
	}
}
