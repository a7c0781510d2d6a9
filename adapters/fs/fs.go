// Package fs holds the adapters for the local file system of the executor's
// host: fs::File (a regular file with text content and a mode),
// fs::Directory (a directory and its mode, not its entries) and fs::Symlink
// (a symbolic link and its target).
package fs

import "github.com/intendhq/intend/adapters"

// Register adds every fs resource type to r. Registering twice panics, as
// adapters.Registry.Register does.
func Register(r *adapters.Registry) {
	r.Register(FileType, File{})
	r.Register(DirectoryType, Directory{})
	r.Register(SymlinkType, Symlink{})
}
