package nodeobject

import (
	"encoding/json"
	"fmt"
	"time"
)

// Node is what berth reads of its Node object.
type Node struct {
	Name, ResourceVersion string
	Annotations, Labels   map[string]string
	// Unschedulable is spec.unschedulable: the node is cordoned.
	Unschedulable bool
	// Ready is the Ready condition's status: "True", "False", "Unknown",
	// or "" when the Node has no Ready condition.
	Ready                     string
	ReadyReason, ReadyMessage string
	// ReadyHeartbeat and ReadyTransition are the Ready condition's
	// lastHeartbeatTime and lastTransitionTime.
	ReadyHeartbeat, ReadyTransition time.Time
}

// nodeJSON is the part of core/v1 Node (k8s.io/api/core/v1) decoded here.
type nodeJSON struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool `json:"unschedulable"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
			// metav1.Time: RFC 3339 or null; time.Time reads null as zero.
			LastHeartbeatTime  time.Time `json:"lastHeartbeatTime"`
			LastTransitionTime time.Time `json:"lastTransitionTime"`
		} `json:"conditions"`
	} `json:"status"`
}

func decodeNode(data []byte) (Node, error) {
	var nj nodeJSON
	if err := json.Unmarshal(data, &nj); err != nil {
		return Node{}, fmt.Errorf("decoding the Node: %w", err)
	}
	n := Node{
		Name:            nj.Metadata.Name,
		ResourceVersion: nj.Metadata.ResourceVersion,
		Annotations:     nj.Metadata.Annotations,
		Labels:          nj.Metadata.Labels,
		Unschedulable:   nj.Spec.Unschedulable,
	}
	for _, c := range nj.Status.Conditions {
		if c.Type == "Ready" {
			n.Ready, n.ReadyReason, n.ReadyMessage = c.Status, c.Reason, c.Message
			n.ReadyHeartbeat, n.ReadyTransition = c.LastHeartbeatTime, c.LastTransitionTime
			break
		}
	}
	return n, nil
}
