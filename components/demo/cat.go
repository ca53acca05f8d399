package main

import (
	"fmt"
	"io"
	"os"
)

// catFiles copies each file to w in order. The demo image has no shell and
// no coreutils, so `kubectl exec` and `kubectl debug node/...` use
// "demo cat FILE..." to show that a command really ran in the pod, or on
// the host under /host.
func catFiles(w io.Writer, paths []string) error {
	if len(paths) == 0 {
		return fmt.Errorf("cat: no file named (usage: demo cat FILE...)")
	}
	for _, p := range paths {
		if err := catFile(w, p); err != nil {
			return err
		}
	}
	return nil
}

func catFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cat: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("cat: copying %s: %w", path, err)
	}
	return nil
}
