#!/bin/bash
set -o xtrace
/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args --node-labels=role=worker
/opt/aws/bin/cfn-signal --exit-code $? --stack my-stack --resource NodeGroup --region us-west-2
