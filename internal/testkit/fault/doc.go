// Package fault injects the failures Azure Table Storage produces under load into requests
// sent through an Azure SDK pipeline, for reliability tests.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
//
// A [Transport] wraps the next policy.Transporter (typically the network) and, for a seeded
// random fraction of the requests that match a predicate:
//
//   - fails the request before it is sent, with a 503 ServerBusy or 500 InternalError reply
//     shaped like the service's (JSON OData error body, x-ms-error-code header); the service
//     never sees it;
//   - or sends it, lets the service apply it, and then loses the reply: the caller gets a 500
//     OperationTimedOut, a timeout error or a connection reset. A retried write then runs
//     twice, which is what makes non-idempotent writes visible.
//
// It can also add latency to every request. Use it below the retry policy, as the client's
// transport or through azurite.TableOptions.Wrap:
//
//	client, checker := azurite.NewTable(t, &azurite.TableOptions{
//		Wrap: func(next policy.Transporter) policy.Transporter {
//			return fault.New(next, fault.Options{Seed: 1, FailBefore: 0.1, LoseReply: 0.1})
//		},
//	})
package fault
