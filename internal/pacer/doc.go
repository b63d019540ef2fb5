// Package pacer spends the Hetzner Cloud API's rate-limit budget so that
// the autoscaler never empties it.
//
// The budget is a token bucket per project (3600 requests, one refilled per
// second, by default) shared with every other tool of the project: the
// cloud controller manager, the CSI driver, Terraform. hcloud-go reads the
// RateLimit headers but never slows down, and retries a 429 after a blind
// 1-16 s jitter. A [Pacer] is an [http.RoundTripper] that sits below
// hcloud-go's client, under its instrumentation:
//
//	hcloud-go handlers -> instrumentation -> Pacer -> debug log -> http.Transport
//
//	p := pacer.New(transport, pacer.WithLogger(log))
//	client := hcloud.NewClient(hcloud.WithHTTPClient(&http.Client{Transport: p}), ...)
//
// # Estimate
//
// Every answer carries RateLimit-Limit (bucket size), RateLimit-Remaining
// and RateLimit-Reset (unix seconds when the bucket is full again). The
// pacer takes the remaining budget from the latest answer, less every
// request of ours that overlapped it (the API may have counted them after
// it, and answers arrive out of order), takes one token for each request
// it sends, and adds the refill rate over time. The rate is the missing
// tokens over the time to the reset, plus one second for the header's
// whole-second resolution, so it errs on the slow side; it starts at one
// per second. Until the first answer tells the budget, requests go one at
// a time. If answers carry no RateLimit headers, requests are not paced.
//
// # Reserve and priorities
//
// [Foreground] requests (every method but GET, HEAD and OPTIONS: creates,
// deletes, power actions) are held back while the estimate is at or below
// the reserve, [WithReserve] (default 5% of RateLimit-Limit, 180 of 3600).
// [Background] requests (GET: polls, listings, refreshes) are held back
// earlier, at the reserve plus another 5% of the limit. A request can be
// marked either way with [WithPriority]. Held-back requests wait in order,
// foreground before background, and are released one per refilled token,
// so the bucket stays at the reserve and creates and deletes go through
// ahead of polls. The pacer counts its own requests only; when other tools
// spend the reserve, it waits until the bucket climbs back.
//
// # 429 answers
//
// When the API answers 429 anyway (another tool emptied the bucket), the
// pacer waits until the headers say one token is back (the reset and limit
// give the refill rate; a Retry-After header is honoured too) and sends
// the request again itself, ahead of everything held back, up to
// [WithMaxRetries] times. The body is sent again through
// [http.Request.GetBody], which hcloud-go's requests have (their bodies are
// [bytes.Reader]s). A request whose body cannot be read again, or whose
// budget would only be back after its deadline, gets the 429 at once, and
// hcloud-go's own retry takes over. hcloud-go's instrumentation sits above
// the pacer and therefore counts a request the pacer re-sent once.
//
// # Bounds
//
// No request waits longer than [WithMaxWait] (a minute by default): then it
// is sent anyway, into the reserve, because the reserve is a courtesy and
// the API has the last word. A request whose context ends while it is held
// back fails with an error wrapping the context's error and is never sent.
// The pacer starts no goroutines, so nothing outlives it.
//
// # Metrics and tests
//
// [Pacer.Stats] returns the last headers, the estimate, the number of
// requests held back, the time spent waiting and the 429s, for the
// metrics layer to export (for example with prometheus GaugeFunc and
// CounterFunc). [WithClock] injects a clock, so tests pace minutes of
// requests in moments.
package pacer
