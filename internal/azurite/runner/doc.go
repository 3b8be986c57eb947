// Package runner installs and runs the Azurite Table Storage emulator. The command
// (`tablets demo` without an account, the soak) and the test kit's Azurite harness
// ([github.com/seed71701133/tablets/internal/testkit/azurite]) both use it; it holds no test
// code, so that the command binary does not link the testing package, and is therefore not
// part of the test kit.
//
// [Start] installs the pinned Azurite (internal/azurite/npm/package.json and
// package-lock.json, embedded in the binary by package npm) into a per-user cache with
// `npm ci`, then starts `azurite-table` with an in-memory store on a free port of 127.0.0.1
// and waits until it answers. It needs Node.js 20+ and npm on PATH and, for the first
// install only, access to the npm registry. The cache directory is $TABLETS_AZURITE_CACHE if
// set, else os.UserCacheDir()/tablets/azurite-<lockfile hash>; concurrent installs (go test
// ./... runs several test binaries at once) are serialized with a file lock in that
// directory, and an install becomes visible only once complete. [Server.Stop] kills it.
package runner
