package rigflags

import (
	"flag"
	"path/filepath"
	"testing"
)

func TestDefaultsEnvironmentAndFlag(t *testing.T) {
	parse := func(args ...string) (image, comp string) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		Image(fs, &image)
		Components(fs, &comp)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return image, comp
	}
	t.Setenv("BERTH_IMAGE", "")
	t.Setenv("BERTH_COMPONENTS_DIR", "")
	if i, c := parse(); i != filepath.Join("build", "image-test") || c != filepath.Join("build", "components") {
		t.Errorf("defaults %q %q", i, c)
	}
	t.Setenv("BERTH_IMAGE", "/img")
	t.Setenv("BERTH_COMPONENTS_DIR", "/comp")
	if i, c := parse(); i != "/img" || c != "/comp" {
		t.Errorf("from the environment %q %q", i, c)
	}
	if i, c := parse("-image", "/a", "-components", "/b"); i != "/a" || c != "/b" {
		t.Errorf("flags over the environment %q %q", i, c)
	}
}
