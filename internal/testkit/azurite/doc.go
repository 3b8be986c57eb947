// Package azurite is the test harness for code that talks to the Azurite Table Storage
// emulator: it runs one Azurite per test binary and checks that requests sent to it respect
// the limits of the real Azure service. It imports the testing package, so only tests may
// import it. It is the test kit's Azurite harness (internal/testkit); the Azurite it runs comes
// from internal/azurite/runner, which the command's demo uses too and so stays outside the kit.
//
// # Running Azurite
//
// Package [github.com/seed71701133/tablets/internal/azurite/runner] installs and runs
// Azurite (the command's demo uses it directly). [Start], [Install], [CacheDir], [Server]
// and [DefaultTransport] here are the runner's, under the harness's names: [Start] installs the pinned Azurite (internal/azurite/npm/package.json and
// package-lock.json, embedded in the binary) into a per-user cache with `npm ci`, then starts
// `azurite-table` with an in-memory store on a free port of 127.0.0.1. It needs Node.js 20+
// and npm on PATH and, for the first install only, access to the npm registry. The cache
// directory is $TABLETS_AZURITE_CACHE if set, else
// os.UserCacheDir()/tablets/azurite-<lockfile hash>; concurrent installs (go test ./... runs
// several test binaries at once) are serialized with a file lock in that directory, and an
// install becomes visible only once complete.
//
// # Tests
//
// A test package that talks to Azurite declares
//
//	func TestMain(m *testing.M) { azurite.Main(m) }
//
// and in each test calls [NewTable], which starts one shared Azurite per test binary on
// first use ([Shared]), creates a fresh table, deletes it when the test ends, and returns a
// client whose transport is a [Checker]. Under `go test -short` such tests are skipped;
// otherwise a failure to start Azurite fails them (it never skips silently).
//
// Azurite is looser than Azure: it accepts filters with hundreds of comparisons, entities
// with more than 252 properties and batches spanning several partitions. The [Checker]
// inspects every request (including each retry) against Azure's documented limits (see
// [MaxFilterComparisons] and the other limit variables) and reports each violation with
// t.Errorf. It also counts requests by kind ([Stats]) for benchmarks and for tests that
// assert that no request was sent.
package azurite
