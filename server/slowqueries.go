package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

// slowQueryParams are the parameters of the query API a slow query's log line gives, those
// a request has: the expression, its range or time, a selector's matchers, a label's name
// is in the path.
var slowQueryParams = []string{"query", "start", "end", "step", "time", "match[]"}

// serveSlowQueryLogged serves a request of the query API with h, and when it took at least
// Options.SlowQueries logs it at Info ("slow query"): its handler, status and time, its
// parameters, and what the account did for it (reqlimit.Tally): the requests sent in its
// context, the bytes they answered, the time they waited for a slot of the process's bound
// and the time they held one (sums over requests, which may overlap). A request whose
// answers came from the caches shows few requests; one that waited on a busy account, long
// held times; one behind the process's other requests, long waits; one that waited for
// another query's reads (the panels of a dashboard, over one metric), reads_joined; one
// that waited for the staging reads' memory, budget_wait; one behind other queries in the
// engine (--query.max-concurrency), engine_queue.
func (s *Server) serveSlowQueryLogged(w http.ResponseWriter, r *http.Request, handler string, h http.Handler) {
	ctx, tally := reqlimit.WithTally(r.Context())
	r = r.WithContext(ctx)
	rec := &statusRecorder{ResponseWriter: w}
	began := s.opts.Now()
	defer func() { // also when a streamed answer aborts with http.ErrAbortHandler
		took := s.opts.Now().Sub(began)
		if took < s.opts.SlowQueries {
			return
		}
		code := rec.code
		if code == 0 {
			code = http.StatusOK
		}
		c := tally.Counts()
		attrs := []any{"handler", handler, "code", code, "took", took,
			"account_requests", c.Requests, "account_bytes", c.ReceivedBytes,
			"account_wait", c.Waited.Round(time.Millisecond), "account_held", c.Held.Round(time.Millisecond),
			"account_slowest", c.Slowest.Round(time.Millisecond), "account_slowest_kind", c.SlowestKind,
			"reads_joined", c.Joined.Round(time.Millisecond), "budget_wait", c.Budget.Round(time.Millisecond),
			"engine_queue", c.Queued.Round(time.Millisecond)}
		_ = r.ParseForm() // parsed by the handler already; else the URL's parameters
		for _, p := range slowQueryParams {
			if v, ok := r.Form[p]; ok {
				attrs = append(attrs, p, strings.Join(v, " "))
			}
		}
		s.log.Info("slow query", attrs...)
	}()
	h.ServeHTTP(rec, r)
}
