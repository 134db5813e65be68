//go:build tools

// The tests' container registry: go-containerregistry's own (cmd/registry, an OCI
// distribution registry in memory), built from this module by `make registry`. The sitting
// day's test pushes images into it and `leaderwatch sitting` reads their platforms from it
// (tests/lab/sitting_day/arch.rs). Nothing here is code of ours.
package tools

import _ "github.com/google/go-containerregistry/cmd/registry"
