package containerd

import "github.com/berth-node/berth/internal/ctrdv2"

// MigrateV2 converts a containerd config document of schema version 2 to
// version 3 in place, with the key moves containerd 2.x makes when it loads
// a version 2 file: internal/ctrdv2.Migrate, which validation
// (config/nodeconfig) runs on a copy too, so that `berth check` refuses
// what the conversion cannot make, and type-checks each version 2 key
// where the conversion puts it (ctrdv2.Where).
func MigrateV2(doc map[string]any) error {
	return ctrdv2.Migrate(doc)
}
