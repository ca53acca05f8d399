// Package awsstub holds host-side stand-ins for the AWS services a node
// talks to (STS, the EKS IAM authenticator, ECR and an ECR-style registry),
// so the EKS-auth and ECR paths are proven end to end with no AWS account;
// and for `make publish`, the EBS direct APIs (ebs) and EC2's image
// registration (ec2).
// They are test infrastructure, but real servers: each verifies what AWS
// verifies (SigV4 signatures, expiry, session tokens) and answers in AWS's
// wire format, including its error shapes.
package awsstub
