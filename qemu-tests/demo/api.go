package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/berth-node/berth/qemu-tests/controlplane"
)

// api is a minimal client for the local cluster's admin endpoint: the demo
// needs a few GETs and POSTs, not client-go.
type api struct {
	c    *http.Client
	base string
}

// requestTimeout bounds one API call.
const requestTimeout = 10 * time.Second

func (a api) do(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding %s %s body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	ct := "application/json"
	if method == "PATCH" {
		ct = "application/merge-patch+json"
	}
	req.Header.Set("Content-Type", ct)
	resp, err := a.c.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decoding %s %s answer: %w", method, path, err)
		}
	}
	return nil
}

type nodeStatus struct {
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		NodeInfo struct {
			KubeletVersion          string `json:"kubeletVersion"`
			ContainerRuntimeVersion string `json:"containerRuntimeVersion"`
			KernelVersion           string `json:"kernelVersion"`
			OSImage                 string `json:"osImage"`
		} `json:"nodeInfo"`
	} `json:"status"`
}

// nodeReady says whether the node is registered and Ready, and what it saw.
func (a api) nodeReady(ctx context.Context) (registered, ready bool, seen string, n nodeStatus) {
	if err := a.do(ctx, "GET", "/api/v1/nodes/"+nodeName, nil, &n); err != nil {
		return false, false, err.Error(), n
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return true, c.Status == "True", fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message), n
		}
	}
	return true, false, "no Ready condition yet", n
}

// podState is the part of a Pod the demo reads.
type podState struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Phase             string `json:"phase"`
		ContainerStatuses []struct {
			Ready bool           `json:"ready"`
			State map[string]any `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// seen is what a wait reports of a pod that is not there yet.
func (p podState) seen() string {
	s := p.Metadata.Name + " phase " + p.Status.Phase
	if p.Status.Phase == "" {
		s = p.Metadata.Name + " not scheduled yet"
	}
	for _, c := range p.Status.ContainerStatuses {
		b, _ := json.Marshal(c.State)
		s += " " + string(b)
	}
	return s
}

// podPhase says whether pod ns/name reached one of phases, and what it saw.
func (a api) podPhase(ctx context.Context, ns, name string, phases ...string) (bool, string, podState) {
	var p podState
	if err := a.do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil, &p); err != nil {
		return false, err.Error(), p
	}
	return slices.Contains(phases, p.Status.Phase), p.seen(), p
}

// runningPod finds a Running pod in ns matching the label selector: a
// DaemonSet's pod has a generated name.
func (a api) runningPod(ctx context.Context, ns, selector string) (string, bool, string) {
	var l struct {
		Items []podState `json:"items"`
	}
	if err := a.do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods?labelSelector="+url.QueryEscape(selector), nil, &l); err != nil {
		return "", false, err.Error()
	}
	if len(l.Items) == 0 {
		return "", false, "no pod with " + selector + " yet"
	}
	var seen []string
	for _, p := range l.Items {
		if p.Status.Phase == "Running" {
			return p.Metadata.Name, true, ""
		}
		seen = append(seen, p.seen())
	}
	return "", false, strings.Join(seen, "; ")
}

// workloadReady says whether an apps/v1 DaemonSet or Deployment (kind
// "daemonsets" or "deployments") has a ready pod, and what it saw.
func (a api) workloadReady(ctx context.Context, kind, ns, name string) (bool, string) {
	var w struct {
		Status struct {
			NumberReady   int `json:"numberReady"`
			ReadyReplicas int `json:"readyReplicas"`
			Desired       int `json:"desiredNumberScheduled"`
			Replicas      int `json:"replicas"`
		} `json:"status"`
	}
	if err := a.do(ctx, "GET", "/apis/apps/v1/namespaces/"+ns+"/"+kind+"/"+name, nil, &w); err != nil {
		return false, err.Error()
	}
	s := w.Status
	ready := s.NumberReady + s.ReadyReplicas
	return ready > 0, fmt.Sprintf("%s/%s: %d ready of %d", kind, name, ready, s.Desired+s.Replicas)
}

// taint is one of a node's spec.taints.
type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// hasTaint says whether taints hold one with key.
func hasTaint(taints []taint, key string) bool {
	for _, t := range taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// nodeInitialized says whether the control plane has removed the cloud
// provider's uninitialized taint kubelet registers with
// (--cloud-provider=external), as EKS's cloud-controller-manager does:
// until then CoreDNS, which does not tolerate it, cannot schedule.
func (a api) nodeInitialized(ctx context.Context) (bool, string) {
	var n struct {
		Spec struct {
			Taints []taint `json:"taints"`
		} `json:"spec"`
	}
	if err := a.do(ctx, "GET", "/api/v1/nodes/"+nodeName, nil, &n); err != nil {
		return false, err.Error()
	}
	if hasTaint(n.Spec.Taints, controlplane.UninitializedTaint) {
		return false, fmt.Sprintf("taints %v", n.Spec.Taints)
	}
	return true, ""
}
