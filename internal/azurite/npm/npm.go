// Package npm embeds the npm manifest and lockfile that pin the Azurite version the tablets
// tests and demo run against (package.json and package-lock.json next to this file). The
// runner ([github.com/seed71701133/tablets/internal/azurite/runner]) installs from them with
// `npm ci`; the files stay here so that tools reading the lockfile find it at a fixed path.
package npm

import _ "embed"

// PackageJSON is the content of package.json.
//
//go:embed package.json
var PackageJSON []byte

// PackageLock is the content of package-lock.json.
//
//go:embed package-lock.json
var PackageLock []byte
