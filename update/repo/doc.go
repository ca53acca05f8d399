// Package repo is berth's update repository: the host side builds and signs
// a TUF (The Update Framework) repository of node releases, and the node
// side reads one and hands back only what the repository's keys vouch for.
//
// A release is, for one architecture and version, two target files: the
// signed UKI ("uki") and the root slot image ("root"), each carrying custom
// metadata {version, arch, rootHash, kind}, where rootHash is the
// dm-verity root hash of the root image (the UKI's command line names it).
// Target paths are "<arch>/<version>/berth.efi" and
// "<arch>/<version>/root.img".
//
// The repository is a plain directory served by any static web server:
//
//	root.json, 1.root.json, 2.root.json ...  root, every version kept
//	N.targets.json, N.snapshot.json          versioned (consistent snapshots)
//	timestamp.json                           the only name that changes
//	targets/<arch>/<version>/<sha256>.berth.efi, <sha256>.root.img
//
// Consistent snapshots make every file but timestamp.json immutable once
// written, so a node that reads while an upload is half done sees either
// the old timestamp (whose files are all still there) or the new one (whose
// files were uploaded first), and caches in front of a bucket can keep
// everything except timestamp.json. Upload order therefore matters: every
// file first, timestamp.json last; the builder writes in that order too.
// A server must answer 404 for a missing N.root.json (the client looks for
// the next root until then): an S3 bucket without s3:ListBucket answers 403,
// which the client reports as an error.
//
// The keys (ed25519, one per role) live outside the repository, beside the
// Secure Boot keys; the node carries the repository's root.json.
package repo
