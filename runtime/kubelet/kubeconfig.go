package kubelet

import (
	"fmt"

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
func (p TokenProvider) Exec(cluster, region string) *ExecConfig {
	args := []string{"eks", "get-token", "--cluster-name", cluster, "--region", region}
	cmd := "aws"
	if p == BerthEKSToken {
		cmd = BerthPath
		args = append([]string{"eks-token"}, args[2:]...)
	}
	return &ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1beta1",
		Command:    cmd,
		Args:       args,
		// Env is written as [] rather than null, as kubectl does.
		Env: []ExecEnvVar{},
		// Never prompt: kubelet has no terminal.
		InteractiveMode: neverExecInteractiveMode,
	}
}

// KubeconfigInputs say where the API server is and how kubelet proves who
// it is. Exactly one of Exec and BootstrapToken is set.
type KubeconfigInputs struct {
	Server string
	// Exec authenticates with an exec credential plugin (EKS).
	Exec *ExecConfig
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
	user := kubeconfigAuthInfo{}
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
	cfg := kubeconfigFile{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []kubeconfigNamedCluster{{
			Name:    "kubernetes",
			Cluster: kubeconfigCluster{Server: in.Server, CertificateAuthority: CACertPath},
		}},
		Contexts: []kubeconfigNamedContext{{
			Name:    "kubelet",
			Context: kubeconfigContext{Cluster: "kubernetes", AuthInfo: "kubelet"},
		}},
		AuthInfos:      []kubeconfigNamedAuthInfo{{Name: "kubelet", AuthInfo: user}},
		CurrentContext: "kubelet",
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding kubeconfig: %w", err)
	}
	return out, nil
}

// The kubeconfig v1 types (k8s.io/client-go/tools/clientcmd/api/v1), only
// the fields berth writes, with their JSON names: importing clientcmd's
// package linked client-go and apimachinery's runtime into PID 1 for one
// file (issue 17). kubelet_test.go reads the output back with the upstream
// types.
type (
	// kubeconfigFile is clientcmd v1's Config.
	kubeconfigFile struct {
		Kind           string                    `json:"kind,omitempty"`
		APIVersion     string                    `json:"apiVersion,omitempty"`
		Clusters       []kubeconfigNamedCluster  `json:"clusters"`
		AuthInfos      []kubeconfigNamedAuthInfo `json:"users"`
		Contexts       []kubeconfigNamedContext  `json:"contexts"`
		CurrentContext string                    `json:"current-context"`
	}
	// kubeconfigCluster is clientcmd v1's Cluster.
	kubeconfigCluster struct {
		Server               string `json:"server"`
		CertificateAuthority string `json:"certificate-authority,omitempty"`
	}
	// kubeconfigAuthInfo is clientcmd v1's AuthInfo.
	kubeconfigAuthInfo struct {
		Token string      `json:"token,omitempty"`
		Exec  *ExecConfig `json:"exec,omitempty"`
	}
	// kubeconfigContext is clientcmd v1's Context.
	kubeconfigContext struct {
		Cluster  string `json:"cluster"`
		AuthInfo string `json:"user"`
	}
	// kubeconfigNamedCluster is clientcmd v1's NamedCluster.
	kubeconfigNamedCluster struct {
		Name    string            `json:"name"`
		Cluster kubeconfigCluster `json:"cluster"`
	}
	// kubeconfigNamedContext is clientcmd v1's NamedContext.
	kubeconfigNamedContext struct {
		Name    string            `json:"name"`
		Context kubeconfigContext `json:"context"`
	}
	// kubeconfigNamedAuthInfo is clientcmd v1's NamedAuthInfo.
	kubeconfigNamedAuthInfo struct {
		Name     string             `json:"name"`
		AuthInfo kubeconfigAuthInfo `json:"user"`
	}
	// ExecConfig is clientcmd v1's ExecConfig.
	ExecConfig struct {
		Command            string       `json:"command"`
		Args               []string     `json:"args"`
		Env                []ExecEnvVar `json:"env"`
		APIVersion         string       `json:"apiVersion,omitempty"`
		ProvideClusterInfo bool         `json:"provideClusterInfo"`
		InteractiveMode    string       `json:"interactiveMode,omitempty"`
	}
	// ExecEnvVar is clientcmd v1's ExecEnvVar.
	ExecEnvVar struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
)

// neverExecInteractiveMode is clientcmd v1's NeverExecInteractiveMode.
const neverExecInteractiveMode = "Never"
