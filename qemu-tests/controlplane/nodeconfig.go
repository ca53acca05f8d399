package controlplane

import (
	"fmt"

	"github.com/berth-node/berth/init/plan"
)

// JoinNodeConfig is a nodeadm NodeConfig that joins this cluster by its
// bootstrap token, named clusterName: the user data of a plain join.
func (i Info) JoinNodeConfig(clusterName string) string {
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
`, plan.BootstrapTokenAnnotation, i.BootstrapToken, clusterName, i.APIServerEndpoint, i.CertificateAuthority, i.ServiceCIDR)
}
