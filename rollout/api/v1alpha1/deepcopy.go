package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The deep copies are written by hand, in the shape deepcopy-gen gives
// them; deepcopy_test.go fills every field and checks the copy shares no
// memory with the original, so a field added without its copy fails.

// DeepCopyInto copies u into out.
func (u *Update) DeepCopyInto(out *Update) {
	*out = *u
	out.TypeMeta = u.TypeMeta
	u.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	u.Spec.DeepCopyInto(&out.Spec)
	u.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of u.
func (u *Update) DeepCopy() *Update {
	if u == nil {
		return nil
	}
	out := new(Update)
	u.DeepCopyInto(out)
	return out
}

// DeepCopyObject is runtime.Object's copy.
func (u *Update) DeepCopyObject() runtime.Object {
	if c := u.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies s into out.
func (s *UpdateSpec) DeepCopyInto(out *UpdateSpec) {
	*out = *s
	if s.NodeSelector != nil {
		out.NodeSelector = s.NodeSelector.DeepCopy()
	}
	if s.MaintenanceWindow != nil {
		out.MaintenanceWindow = s.MaintenanceWindow.DeepCopy()
	}
}

// DeepCopy returns a copy of s.
func (s *UpdateSpec) DeepCopy() *UpdateSpec {
	if s == nil {
		return nil
	}
	out := new(UpdateSpec)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies w into out.
func (w *MaintenanceWindow) DeepCopyInto(out *MaintenanceWindow) {
	*out = *w
	if w.Days != nil {
		out.Days = make([]string, len(w.Days))
		copy(out.Days, w.Days)
	}
}

// DeepCopy returns a copy of w.
func (w *MaintenanceWindow) DeepCopy() *MaintenanceWindow {
	if w == nil {
		return nil
	}
	out := new(MaintenanceWindow)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *UpdateStatus) DeepCopyInto(out *UpdateStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	if s.Nodes != nil {
		out.Nodes = make([]NodeStatus, len(s.Nodes))
		for i := range s.Nodes {
			s.Nodes[i].DeepCopyInto(&out.Nodes[i])
		}
	}
	out.StartedAt = copyTime(s.StartedAt)
	out.CompletedAt = copyTime(s.CompletedAt)
}

// DeepCopy returns a copy of s.
func (s *UpdateStatus) DeepCopy() *UpdateStatus {
	if s == nil {
		return nil
	}
	out := new(UpdateStatus)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies n into out.
func (n *NodeStatus) DeepCopyInto(out *NodeStatus) {
	*out = *n
	out.Started = copyTime(n.Started)
	out.Requested = copyTime(n.Requested)
	out.SoakSince = copyTime(n.SoakSince)
	out.Finished = copyTime(n.Finished)
}

// DeepCopy returns a copy of n.
func (n *NodeStatus) DeepCopy() *NodeStatus {
	if n == nil {
		return nil
	}
	out := new(NodeStatus)
	n.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies l into out.
func (l *UpdateList) DeepCopyInto(out *UpdateList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Update, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *UpdateList) DeepCopy() *UpdateList {
	if l == nil {
		return nil
	}
	out := new(UpdateList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject is runtime.Object's copy.
func (l *UpdateList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}

func copyTime(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return t.DeepCopy()
}
