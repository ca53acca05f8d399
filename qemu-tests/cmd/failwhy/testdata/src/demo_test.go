package demo

func TestA(t *testing.T) {
	t.Logf("booting")
	if bad {
		t.Errorf("boot report: %v", rep)
	}
	waitReady(t)
}

func TestB(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		t.Fatalf("kubectl get nodes: %v\n%s",
			err, out)
	})
}

func TestC(t *testing.T) {
	t.Log("fine")
}
