// Package nocloud reads a NoCloud seed: the user-data, meta-data and
// network-config files that Proxmox, libvirt (virt-install --cloud-init),
// Harvester and OpenStack's config drive put on a small vfat or iso9660
// volume labelled cidata, for cloud-init. berth reads the same files
// without running cloud-init.
//
// The package only decides: it reads files from an fs.FS (the mounted
// seed, or a directory given to `berth check --seed DIR`) and parses
// them. It mounts nothing and touches no network.
//
//   - user-data is returned as bytes, unparsed: it goes to the user-data
//     path berth already has (config/userdata.DecodeNamed, then
//     nodeconfig), so a seed takes every format that path takes.
//   - meta-data is cloud-init's YAML: instance-id and local-hostname are
//     read, other keys are ignored with a warning naming them.
//   - network-config is cloud-init's version 1 (physical interfaces and
//     nameservers) or version 2 (netplan's ethernets), with or without a
//     top-level network: key. What berth cannot configure (bonds,
//     bridges, VLANs, Wi-Fi, unknown keys) is refused, naming the file,
//     the line and the key path. NetworkConfig turns the result into the
//     network package's Config.
//
// Read takes a seed for a booting node. Inspect is the view of `berth
// check --seed` and `berth render --seed`: it reads every file whatever
// the others hold, so that one run names every problem, refuses what a
// node could not use (no user-data, or an empty one; a network-config
// NetworkConfig refuses), hands user-data to nodeconfig as a source named
// by its path, gives its problems as nodeconfig's (file, line, key path),
// and describes what the seed decides (Inspection.Describe).
//
// Every problem is a Problem: file, line, key path and what is wrong.
package nocloud
