// Package redact keeps the secrets of the storage account out of what the server answers:
// every handler's error reply goes through Secrets.
package redact

import "regexp"

// secretPattern finds what an error from the storage account may carry that grants access
// to it: a SAS token's signature in a request URL (sig=..., also percent-encoded when a URL
// is nested in another), a connection string's AccountKey= or SharedAccessSignature=, and a
// Shared Key Authorization header's signature. The value runs over base64 and the
// percent-encodings of its +, / and =; & (or %26) ends it. The name must start a
// parameter, so that a "design=" is not taken for a "sig=".
var secretPattern = regexp.MustCompile(`(?i)((?:^|[^A-Za-z0-9_]|%3F|%26|%3B)(?:sig|AccountKey|SharedAccessSignature)(?:=|%3D)|\bSharedKey(?:Lite)?\s+[^\s:]+:)(?:[A-Za-z0-9+/_.~=-]|%2[BF]|%3D)+`)

// Secrets replaces the secrets in an error message by REDACTED, keeping the rest of it (the
// table and operation that failed) for the user.
func Secrets(msg string) string {
	return secretPattern.ReplaceAllString(msg, "${1}REDACTED")
}
