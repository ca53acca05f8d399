// Package deploy holds the rollout controller's manifests: the Update CRD
// (crd.yaml), the controller's Deployment and its least-privilege RBAC
// (controller.yaml), and an example Update (example-update.yaml). They
// are embedded, for the tests and rigs that apply them.
package deploy

import "embed"

// Manifests are the YAML files of this folder.
//
//go:embed *.yaml
var Manifests embed.FS
