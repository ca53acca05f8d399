#!/bin/bash
set -e
# pre bootstrap user data
echo "hello from pre-bootstrap"
cat <<'YAML' > /etc/motd
welcome; this is /etc/eks/bootstrap.sh's node
YAML
export SERVICE_IPV4_CIDR=172.20.0.0/16
B64_CLUSTER_CA=LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
API_SERVER_URL="https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com"
/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args "--node-labels=node.kubernetes.io/lifecycle=spot --register-with-taints=dedicated=ci:NoSchedule" \
  --b64-cluster-ca $B64_CLUSTER_CA --apiserver-endpoint "$API_SERVER_URL" --local-disks raid0
# post bootstrap user data
yum install -y amazon-ssm-agent
systemctl enable amazon-ssm-agent && systemctl start amazon-ssm-agent
