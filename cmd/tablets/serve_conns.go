package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed71701133/tablets/internal/connmeter"
)

// serveConns are the connections a server counts: the account client's, and each
// listener's.
type serveConns struct {
	account, public, internal connmeter.Conns
}

// connCollector exports the connections open and opened: the goroutines they hold come and
// go with the requests in flight (two an account connection, one a listener's).
func connCollector(c *serveConns) prometheus.Collector {
	return &connMetrics{c: c,
		account: prometheus.NewDesc("tablets_account_connections",
			"Connections to the storage account open, idle or in use (the client keeps up to 64 idle for 90 s; each holds two goroutines).", nil, nil),
		accountOpened: prometheus.NewDesc("tablets_account_connections_opened_total",
			"Connections to the storage account opened. Where it grows with the requests rather than now and then, connections are not reused.", nil, nil),
		http: prometheus.NewDesc("tablets_http_connections",
			"Connections the server's listeners accepted and hold open (each holds a goroutine).", []string{"listener"}, nil),
		httpAccepted: prometheus.NewDesc("tablets_http_connections_accepted_total",
			"Connections the server's listeners accepted.", []string{"listener"}, nil),
	}
}

type connMetrics struct {
	c                                          *serveConns
	account, accountOpened, http, httpAccepted *prometheus.Desc
}

func (m *connMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.account
	ch <- m.accountOpened
	ch <- m.http
	ch <- m.httpAccepted
}

func (m *connMetrics) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.account, prometheus.GaugeValue, float64(m.c.account.Open()))
	ch <- prometheus.MustNewConstMetric(m.accountOpened, prometheus.CounterValue, float64(m.c.account.Opened()))
	for _, l := range []struct {
		name  string
		conns *connmeter.Conns
	}{{"public", &m.c.public}, {"internal", &m.c.internal}} {
		ch <- prometheus.MustNewConstMetric(m.http, prometheus.GaugeValue, float64(l.conns.Open()), l.name)
		ch <- prometheus.MustNewConstMetric(m.httpAccepted, prometheus.CounterValue, float64(l.conns.Opened()), l.name)
	}
}
