// Package boundary has no code of its own: its tests keep the repository's
// shape. PID 1 must not link host-side code (the image builder, the QEMU
// rigs), and nothing in the tree may read files from outside the
// repository, because users clone berth with nothing beside it.
package boundary
