package kubelet

import (
	"fmt"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// TokenProvider picks the exec credential plugin that gives kubelet its EKS
// token. It is the seam between the kubeconfig and the signer.
type TokenProvider int

const (
	// BerthEKSToken, the default, runs berth's own signer,
	// `/sbin/berth eks-token`, with the AWS CLI's arguments, so the image
	// needs no AWS CLI.
	BerthEKSToken TokenProvider = iota
	// AWSCLI runs `aws eks get-token`, as nodeadm's kubeconfig does; the
	// image must ship the AWS CLI.
	AWSCLI
)

// BerthPath is berth in the root image; kubelet execs it as the plugin.
const BerthPath = "/sbin/berth"

// Exec is the exec credential plugin command for an EKS cluster. cluster
// is the cluster name (the cluster ID on Outposts, as in nodeadm).
func (p TokenProvider) Exec(cluster, region string) *clientcmdv1.ExecConfig {
	args := []string{"eks", "get-token", "--cluster-name", cluster, "--region", region}
	cmd := "aws"
	if p == BerthEKSToken {
		cmd = BerthPath
		args = append([]string{"eks-token"}, args[2:]...)
	}
	return &clientcmdv1.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1beta1",
		Command:    cmd,
		Args:       args,
		// Env is written as [] rather than null, as kubectl does.
		Env: []clientcmdv1.ExecEnvVar{},
		// Never prompt: kubelet has no terminal.
		InteractiveMode: clientcmdv1.NeverExecInteractiveMode,
	}
}

// KubeconfigInputs say where the API server is and how kubelet proves who
// it is. Exactly one of Exec and BootstrapToken is set.
type KubeconfigInputs struct {
	Server string
	// Exec authenticates with an exec credential plugin (EKS).
	Exec *clientcmdv1.ExecConfig
	// BootstrapToken is a "<id>.<secret>" bootstrap token (TLS
	// bootstrapping, for clusters that are not EKS).
	BootstrapToken string
}

// Kubeconfig renders the kubeconfig (or, with a bootstrap token, the
// bootstrap kubeconfig) as YAML with the CA read from CACertPath.
func Kubeconfig(in KubeconfigInputs) ([]byte, error) {
	if in.Server == "" {
		return nil, fmt.Errorf("rendering kubeconfig: cluster.apiServerEndpoint is empty")
	}
	user := clientcmdv1.AuthInfo{}
	switch {
	case in.Exec != nil && in.BootstrapToken != "":
		return nil, fmt.Errorf("rendering kubeconfig: both an exec plugin and a bootstrap token were given")
	case in.Exec != nil:
		user.Exec = in.Exec
	case in.BootstrapToken != "":
		user.Token = in.BootstrapToken
	default:
		return nil, fmt.Errorf("rendering kubeconfig: no credentials (exec plugin or bootstrap token)")
	}
	cfg := clientcmdv1.Config{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    "kubernetes",
			Cluster: clientcmdv1.Cluster{Server: in.Server, CertificateAuthority: CACertPath},
		}},
		Contexts: []clientcmdv1.NamedContext{{
			Name:    "kubelet",
			Context: clientcmdv1.Context{Cluster: "kubernetes", AuthInfo: "kubelet"},
		}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: "kubelet", AuthInfo: user}},
		CurrentContext: "kubelet",
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return out, nil
}
