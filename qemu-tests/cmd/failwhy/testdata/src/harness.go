package demo

func start(t *testing.T) (*VM, error) {
	if err := run(); err != nil {
		return nil, fmt.Errorf("qemu: starting: %w", err)
	}
	logf("qemu: pid %d: %s", pid, args)
	t.Cleanup(func() {
		t.Logf("qemu: console tail:\n%s", tail)
	})
}
