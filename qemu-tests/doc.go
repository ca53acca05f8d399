// Package qemutests holds berth's integration tests: each boots the test
// image (build/image-test, or $BERTH_IMAGE) under QEMU with the harness in
// qemu-tests/qemu and checks what the guest does. Run them with
// `make test-qemu`; they run one VM at a time, since CI has 2 cores and TCG.
package qemutests
