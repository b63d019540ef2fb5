// Package actionwait waits for Hetzner Cloud actions on behalf of every
// caller in a process. The pools of a Cluster share one [Waiter], and so
// can any other code that starts actions with hcloud-go:
//
//	w := actionwait.New(&client.Action, actionwait.WithLogger(log))
//	defer w.Close()
//	res, _, err := client.Server.Create(ctx, opts)
//	...
//	err = w.Wait(ctx, res.Action)
//
// # Schedule
//
// One [Waiter] per process polls every action that any caller waits for,
// 50 per GET /actions (the largest page), and wakes each caller when its
// actions have finished. Requests and polls do not wait for each other:
// each request wakes the callers it answers for and schedules its own
// actions, and the next poll goes out on schedule while a request of an
// earlier one is still on the wire, so a request that hangs (up to 30 s)
// holds back only the actions it asked for. No action is asked for by two
// requests at once: one on the wire keeps its actions out of later polls
// until it has answered or failed.
// Nothing is polled while nobody waits. It polls an action when it can
// have finished, not on a fixed beat, because at real durations (a
// create_server takes 10-20 s) polls, not creates, would spend the API
// budget.
//
// What it learns: the duration of every successful action it watched, as
// the API reports it (finished minus started, but no more than the
// waiter itself saw pass, in case the API's clock is off; what the waiter
// saw when the API reports it finished before it started), per command
// and per command and class. A class is a finer kind that the caller
// names with [Waiter.WaitAs]: a pool waits for its creates as
// "<server type>/<location>". The waiter expects an action to take the
// shortest of the last 8 durations of its class, else of its command
// ([Waiter.Expected]), at most 60 poll intervals (30 s); the shortest,
// because a poll too early costs one request and a poll too late costs
// latency for the whole batch. Before it has seen an action of a command
// finish, it expects the prior, [PriorIntervals] poll intervals (2 s with
// [DefaultPollInterval]): about the fastest actions, so that nothing
// waits long for a first look.
//
// When it polls ([DefaultPollInterval] is 500 ms):
//   - an action is first polled when it is expected to be done, counted
//     from the Wait that brought it;
//   - a poll waits up to one poll interval for further actions due by
//     then, so that a batch started together costs one poll;
//   - a running action is polled again one interval later if others of
//     its command finished in the same poll (the batch is finishing);
//     otherwise after the time its progress says it still needs
//     (elapsed × (100 − progress) / progress), or half its age when the
//     API reports no progress;
//   - no action waits more than [MaxGapIntervals] poll intervals (5 s)
//     between two polls, so an action slower than everything learned is
//     seen at most 11 intervals (5.5 s) after it finishes;
//   - no two polls start less than one poll interval apart.
//
// Each action has its own schedule, so a slow action never holds back
// the others: a Wait returns as soon as its own actions are seen
// finished. The learned numbers decide only when to ask: every result
// still comes from the API, so a wrong estimate costs requests or
// latency, never a wrong state. At 15 s creates a warm waiter scales up
// 50 servers with one poll of their 100 actions, 2 requests of 50
// (BENCHMARKS.md).
//
// # Metrics
//
// With [WithRegisterer] the waiter reports hcloudscale_action_duration_seconds,
// hcloudscale_action_polls and hcloudscale_action_poll_requests_total
// (internal/metrics), register-or-reuse, so that it shares the collectors
// of the pools on the same registerer. The waiter logs with zap as
// "waiter".
package actionwait
