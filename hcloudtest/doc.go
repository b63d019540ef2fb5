// Package hcloudtest runs an in-memory Hetzner Cloud API on 127.0.0.1 for
// tests, in the spirit of [net/http/httptest]. The real hcloud-go client
// talks to it unchanged; the JSON is built from hcloud-go's schema types,
// so shapes match the real API.
//
//	s := hcloudtest.NewServer(hcloudtest.WithClock(clock))
//	defer s.Close()
//	client := s.Client() // token, endpoint, 1 ms poll and retry backoffs
//
// # Resources
//
// Servers (create, get, list, update, delete; poweron, poweroff, shutdown,
// reboot, reset, attach_to_network, detach_from_network; a server's
// actions, whose commands are the API's: start_server, stop_server,
// shutdown_server, reboot_server, reset_server, ...), actions (by ID and
// listed by id filters; also per resource kind, GET /servers/actions and
// /servers/actions/{id}, and per resource, /servers/{id}/actions and
// /servers/{id}/actions/{action_id}, the same under /primary_ips), server types,
// locations, images, networks, firewalls, SSH keys, placement groups
// (also created and deleted), Primary IPs and pricing. What the API has removed answers 410
// deprecated_api_endpoint with the announcement in details: GET
// /datacenters and /datacenters/{id} (since 2026-10-01) and GET /actions
// without an id filter (since 2025-01-30).
//
// A server's public IPv4 and IPv6 are Primary IPs (GET, POST, PUT and
// DELETE /primary_ips, actions assign and unassign, which need the server
// off and lock the IP and the server while they run; a delete needs the
// IP unassigned, as since 2026-05-01): created
// with the server with auto_delete set and deleted with it,
// or existing ones named in public_net.ipv4/ipv6, which stay, unassigned
// (assignee_type "unassigned"), when the server goes. A version that
// public_net disables gets none, even if an ID is named for it ("if false,
// no IPv4 address will be attached"), and the server renders it as null.
// A server created on an existing Primary IP without a location goes
// where the IP is, the only location it can be assigned in.
//
// The catalogue is shaped like Hetzner's offer but illustrative, not a
// copy of it: locations fsn1, nbg1, hel1, ash, hil and sin; shared x86
// types cx23-cx53 and cpx11-cpx51 (cx only in the EU, cpx everywhere),
// dedicated ccx13-ccx63, Arm cax11-cax41 (EU only); system images
// ubuntu-24.04, ubuntu-22.04 and debian-12 for x86 and arm. No type is
// deprecated until a test says so ([Server.DeprecateServerType]), and
// prices are plausible, not Hetzner's: compare against what the fake
// answers, not against a price list.
//
// Lists follow the API: page and per_page (default 25, at most 50),
// meta.pagination, sort=field[:asc|:desc], name filters and label
// selectors (k, !k, k=v, k==v, k!=v, k in (a,b), k notin (a,b); a comma
// means and). Server names are unique per project (uniqueness_error),
// placement groups hold at most 10 servers
// (placement_group_member_limit_reached), a project at most
// [MaxPlacementGroups] of them (resource_limit_exceeded), a group with
// servers cannot be deleted ([ErrorCodeResourceInUse]), and
// [WithServerLimit] caps the
// project (resource_limit_exceeded). Errors have the API's body
// {"error":{"code","message","details"}}; invalid_input lists every bad
// field at once in details.fields. References that do not exist in a
// create request (server type, image, location, SSH key, network,
// firewall, placement group) are invalid_input, as the API answers for
// images. HTTP statuses follow the API reference's error table
// ([StatusForCode]): 400 json_error, 403 resource_limit_exceeded, 404
// not_found, 409 uniqueness_error, 412 resource_unavailable, 422
// invalid_input, 423 locked, 429 rate_limit_exceeded, and so on; the
// call-specific codes follow the reference's per-operation tables (422
// placement_error and server_not_stopped, 412
// primary_ip_version_mismatch, ...).
//
// # Time and actions
//
// Every asynchronous state change is an action that completes when the
// server's [Clock] reaches its due time: a create is initializing until
// create_server finishes, then starting until start_server finishes, then
// running (or off when start_after_create is false); a delete is deleting
// until delete_server finishes, then gone. Actions are evaluated lazily on
// every request and state accessor, so no goroutine runs in the
// background. Durations come from [WithActionDuration] and
// [WithDefaultActionDuration]; the defaults are short (create_server 1 s,
// most others 500 ms). Inject a [ManualClock] to make tests deterministic:
// actions finish exactly when the test advances it. A
// k8s.io/utils/clock/testing.FakeClock does as well; given to the code
// under test too (hcloudscale.WithClock), one Step moves the fake's
// actions and rate-limit refill and that code's TTLs and waits together,
// and FakeClock.HasWaiters tells when that code waits. [WallWaits] gives
// code the manual time for its TTLs and lets its waits pass in wall time. A server with a running
// action is locked: power and network actions on it get locked.
//
// # Faults
//
// [Server.FailRequest] fails the nth matching request with any code or
// status, optionally after the operation took effect (a lost response);
// [Server.DropConnection] closes the connection without an answer;
// [Server.FailAction] makes the next action of a command end in error;
// [Server.ForgetActions] makes a server's actions vanish, as old actions
// do in the API (a running one never takes effect);
// [Server.SetUnavailable] makes creates of a server type and/or location
// fail with resource_unavailable while the catalogue still offers it (as
// during Hetzner's shortages); [Server.SetLatency] delays requests;
// [Server.SetOutage] fails every request on every endpoint until lifted,
// [Server.SetEndpointOutage] every request of one endpoint;
// [Server.HoldRequest] keeps one request waiting, as a hung connection
// does, until released.
// [Server.SetServerTypeAvailable] and [Server.DeprecateServerType] change
// the catalogue itself; a deprecation plays out over time as in the API:
// from its unavailable_after on the location shows available false, and
// once every location of a type is deprecated so is the type's top level.
//
// # Rate limit
//
// A token bucket modelled on Hetzner's (3600 requests, one refilled per
// second on the server's clock; see [WithRateLimit]) sets RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset on every response and answers
// 429 rate_limit_exceeded when empty. It is on by default, so a test that
// polls thousands of times without advancing its clock runs dry as a real
// client would; [WithRateLimit](0, 0) turns it off (the headers then show
// a full bucket of 3600, since the API always sends them), and
// [Server.SetRateLimitRemaining] drains or fills the bucket.
//
// # Observability
//
// [Server.Requests] is the request log, with each request's token and its
// arrival and handling times; [WithTokens] gives several clients a token
// each, so that every request is attributed. [Server.Count] and [Server.Counts]
// count requests by template, such as "POST /servers" or
// "GET /actions". [Server.Servers], [Server.AddServer],
// [Server.SetServerStatus], [Server.DeleteServerNow], [Server.DeleteImage]
// and the other Add
// methods read and change the project directly, for example to simulate
// servers left behind by another tool or a crash, or, a status at a time,
// a power cycle, reset, rebuild or migration of a server
// (SetServerStatus sets any status, with no action and no lock).
//
// # Fidelity
//
// The fake follows the API as of December 2026: the Hetzner Cloud API
// reference (docs.hetzner.cloud) and hcloud-go v2.52.0, whose fixtures
// decide where the reference is silent. Besides what is described above,
// lists send the API's Link header (prev, next, last), a new server's
// firewalls are pending until it is created, and GET /pricing still has
// the deprecated floating_ip and traffic objects, priced, and Primary IP
// prices per location only.
//
// Not modelled: volumes, floating IPs, load balancers, certificates,
// DNS, ISOs, backups, rescue, rebuild, change_type and protection
// (nothing is protected); reverse DNS beyond the default; traffic
// accounting. Unknown fields in a request body are ignored, but the
// datacenter property, removed from server and Primary IP create
// requests on 2026-07-01, is refused as invalid_input naming it: the
// reference does not say what the API answers to it, and a refusal keeps
// a test from passing on a request the API no longer honours. Where the reference
// names no code (a full placement group), or does not say how the
// top-level deprecation of a server type derives from its locations, the
// choice is written where it is made ([StatusForCode],
// [Server.DeprecateServerType]).
//
// # Concurrency
//
// A Server is safe for concurrent use. One mutex guards the project state,
// so each request is atomic. [Server.Close] waits for outstanding requests.
package hcloudtest
