package controlplane

// berth's kubelet runs with --cloud-provider=external, as on EKS: it
// registers its node with the node.cloudprovider.kubernetes.io/uninitialized
// taint, and the cloud-controller-manager (AWS's, in EKS's control plane)
// removes it once it has initialized the node. The test control plane has
// no cloud, so it plays that part: without it, nothing without a blanket
// toleration (CoreDNS, any Deployment) is ever scheduled on a berth node.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// UninitializedTaint is the cloud provider's "not initialized yet" taint
// (k8s.io/cloud-provider/api.TaintExternalCloudProvider).
const UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// taint is a node taint as the API has it; other fields survive the
// round trip in raw.
type taint = map[string]any

// withoutUninitialized returns taints without the cloud provider's, and
// whether it was there.
func withoutUninitialized(taints []taint) ([]taint, bool) {
	out := make([]taint, 0, len(taints))
	found := false
	for _, tn := range taints {
		if tn["key"] == UninitializedTaint {
			found = true
			continue
		}
		out = append(out, tn)
	}
	return out, found
}

// initializeNodes removes the uninitialized taint from every node that
// has it, every approveInterval until ctx ends.
func (c *Cluster) initializeNodes(ctx context.Context) {
	t := time.NewTicker(approveInterval)
	defer t.Stop()
	for {
		if err := c.initializeOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("node initializer", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) initializeOnce(ctx context.Context) error {
	host := c.hostEndpoint()
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Taints []taint `json:"taints"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := c.getJSON(ctx, host+"/api/v1/nodes", &list); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range list.Items {
		rest, found := withoutUninitialized(n.Spec.Taints)
		if !found {
			continue
		}
		// The test op makes the patch fail, rather than drop a taint
		// kubelet or someone else added since the list.
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/spec/taints", "value": n.Spec.Taints},
			{"op": "replace", "path": "/spec/taints", "value": rest},
		})
		if err != nil {
			return fmt.Errorf("node %s: encoding the taint patch: %w", n.Metadata.Name, err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, host+"/api/v1/nodes/"+url.PathEscape(n.Metadata.Name), bytes.NewReader(patch))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json-patch+json")
		resp, err := c.client.Do(req)
		if err != nil {
			return fmt.Errorf("node %s: removing the %s taint: %w", n.Metadata.Name, UninitializedTaint, err)
		}
		rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node %s: removing the %s taint: %s: %.300s", n.Metadata.Name, UninitializedTaint, resp.Status, rb)
		}
		c.log.Info("node initialized (uninitialized taint removed, as a cloud-controller-manager does)", "node", n.Metadata.Name)
	}
	return nil
}
