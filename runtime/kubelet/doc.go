// Package kubelet decides everything berth gives kubelet: the
// KubeletConfiguration (nodeadm's defaults, with berth's cgroup layout), the
// drop-in holding the user's kubelet.config, the kubeconfig, the resource
// reservations and the command line. It is pure: inputs in, bytes and argv
// out; the plan package calls it and the apply phase writes the result.
//
// # Cgroups
//
// berth has no systemd, so kubelet runs with cgroupDriver cgroupfs and the
// cgroup paths are literal paths under /sys/fs/cgroup. berth places its two
// long-running services the way an AL2023 node's systemd does, so tools that
// look for runtime.slice find the same tree:
//
//	/runtime.slice             kubeReservedCgroup: what kubeReserved accounts for
//	/runtime.slice/containerd  containerd and its shims (--runtime-cgroups)
//	/runtime.slice/kubelet     kubelet itself (kubeletCgroups)
//	/system.slice              systemReservedCgroup: berth (PID 1) and helpers
//	/kubepods                  pods (kubelet's own, under cgroupRoot "/")
//
// The supervisor must create these and start each service in its cgroup
// (Service.Cgroup in the plan). Only "pods" is enforced
// (enforceNodeAllocatable's default), so the reserved cgroups are accounting
// names kubelet checks exist, never limits it writes.
//
// # Authentication
//
// On EKS the kubeconfig uses an exec credential plugin, as nodeadm's does.
// Which command provides the token is TokenProvider: by default
// BerthEKSToken (`/sbin/berth eks-token`, berth's own SigV4 signer over the
// instance role's IMDS credentials); AWSCLI (`aws eks get-token`, nodeadm's
// choice) for images that ship the AWS CLI.
//
// # Image credential provider
//
// Like nodeadm, berth points kubelet at an ECR credential provider:
// CredentialProviderConfig (CredentialProviderConfigPath) names
// ecr-credential-provider for ECR's registry patterns, and for ECR
// Public's hosts from kubelet 1.32 (ServesECRPublic), and
// CredentialProviderBinDir holds it as a link to berth.
//
// For clusters that are not EKS, and for the local test cluster, kubelet can
// join with a bootstrap token instead (TLS bootstrapping): berth writes
// /var/lib/kubelet/bootstrap-kubeconfig holding the token, passes
// --bootstrap-kubeconfig, and kubelet writes /var/lib/kubelet/kubeconfig
// itself once its CSR is approved. The plan package says where the token
// comes from.
package kubelet
