package controlplane

import (
	"fmt"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/init/plan"
)

// JoinNodeConfig is a nodeadm NodeConfig that joins this cluster by its
// bootstrap token, named clusterName: the user data of a plain join.
func (i Info) JoinNodeConfig(clusterName string) string {
	return i.JoinNodeConfigMirrored(clusterName, "")
}

// JoinNodeConfigMirrored is JoinNodeConfig with berth's registry-mirrors
// annotation set to mirrors (clusterimages.MirrorAnnotation's value),
// when not empty: the node then pulls the cluster's images from the
// registry stand-in.
func (i Info) JoinNodeConfigMirrored(clusterName, mirrors string) string {
	ann := ""
	if mirrors != "" {
		ann = fmt.Sprintf("    %s: '%s'\n", nodeconfig.RegistryMirrorsAnnotation, mirrors)
	}
	return fmt.Sprintf(`apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  annotations:
    %s: %s
%sspec:
  cluster:
    name: %s
    apiServerEndpoint: %s
    certificateAuthority: %s
    cidr: %s
`, plan.BootstrapTokenAnnotation, i.BootstrapToken, ann, clusterName, i.APIServerEndpoint, i.CertificateAuthority, i.ServiceCIDR)
}
