package pool

import (
	"context"
	"net/http/httptrace"
	"sync"
)

// requestContext returns the context for a claim's create request and its
// retries (ours and hcloud-go's). It ends with reqCtx, and when stop ends
// (the claim was removed), except while an attempt is on the wire: from
// the moment the attempt has a connection until its answer starts to
// arrive, the API may be creating the server, and cutting the connection
// then would leave the outcome unknown. Such an attempt ends first; then
// no further attempt is sent. A request still waiting (for a connection,
// in the pacer, in a backoff between retries) ends at once.
//
// The attempt counts as on the wire from GotConn, not only from
// WroteRequest: the transport writes the request before it reports it
// written, and a cut in between leaves a request the API has received
// and acts on while the flow, finding no server by name yet, would
// report none.
//
// It relies on the HTTP transport's client trace (net/http/httptrace),
// which http.Transport and its HTTP/2 implementation call. With a
// transport that does not, it ends with stop at once; the lookup by name
// after an ambiguous failure covers that case.
func requestContext(reqCtx, stop context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(reqCtx)
	var mu sync.Mutex // guards onWire and stopped
	var onWire, stopped bool
	settle := func(wire bool) {
		mu.Lock()
		defer mu.Unlock()
		onWire = wire
		if stopped && !onWire {
			cancel()
		}
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// A new attempt: the previous one is over, whatever its end.
		GetConn:              func(string) { settle(false) },
		GotConn:              func(httptrace.GotConnInfo) { settle(true) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { settle(true) },
		GotFirstResponseByte: func() { settle(false) },
	})
	unhook := context.AfterFunc(stop, func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if !onWire {
			cancel()
		}
	})
	return ctx, func() {
		unhook()
		cancel()
	}
}
