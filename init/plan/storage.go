package plan

import "github.com/berth-node/berth/config/nodeconfig"

// storageModules are the kernel modules the instance-store strategy needs,
// loaded before the storage phase rather than on the kernel's demand:
// /dev/mapper/control only exists once dm_mod is loaded, and nothing asks
// for it before berth opens it.
func storageModules(ls *nodeconfig.LocalStorageOptions) []string {
	if ls == nil || ls.Strategy == "" {
		return nil
	}
	// Both filesystems: the storage policy in the image picks one, and a
	// reboot may find the other already on the disks.
	mods := []string{"xfs", "ext4"}
	if ls.Strategy != nodeconfig.LocalStorageMount {
		mods = append(mods, "dm_mod")
	}
	if ls.Strategy == nodeconfig.LocalStorageRAID10 {
		mods = append(mods, "dm_raid", "raid10")
	}
	return mods
}
