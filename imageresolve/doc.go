// Package imageresolve turns the image spec of a node pool into a Hetzner
// Cloud image for one CPU architecture, cheaply and predictably.
//
// # Precedence
//
// [Select] picks the spec per architecture: the pool's imagesForArch entry,
// else the global imagesForArch entry, else HCLOUD_IMAGE. Each architecture
// is decided on its own. The config package applies the same rule when it
// fills the Images of each [config.Pool]; [Resolver.ResolvePool] reads the
// result. An empty
// spec is an error ([MissingSpecError]) naming the pool and the
// architecture, never "the newest snapshot of the project" as upstream
// does.
//
// # Lookup
//
// [Classify] decides the first lookup, and the resolver then keeps
// upstream's order:
//
//   - ID (ASCII digits): GET /images/{id}. An image of another architecture
//     is rejected with [ArchMismatchError]. No image with that ID: the spec
//     is tried as a name.
//   - Name: GET /images?name=…&architecture=…&include_deprecated=true. No
//     match: the spec is tried as a label selector, so a bare label key such
//     as "golden" still selects snapshots.
//   - Label selector (anything with "=", "!", ",", parentheses or spaces):
//     the newest available snapshot of the architecture carrying the labels,
//     GET /images?type=snapshot&status=available&sort=created:desc&label_selector=…
//     with one result per page, so one request however many snapshots match.
//
// Nothing found is a [NotFoundError] naming the spec and the architecture;
// failed requests are wrapped with %w. Deprecated images are returned with
// [Image.Deprecated] set and logged at warn level once per image.
//
// # Cache and API cost
//
// Results are cached per spec and architecture for [WithTTL]
// ([DefaultTTL], five minutes): a pool growing by 50 servers costs one lookup, and a new
// snapshot matching a selector is used within one TTL; [Resolver.Invalidate]
// forces it sooner. "Not found" and "wrong architecture" are cached for
// [WithNegativeTTL] ([DefaultNegativeTTL], 30 seconds), short so a freshly uploaded image is found
// soon, long enough that a misconfigured pool retried every autoscaler loop
// does not cost up to three requests each time. Failed requests are never
// cached.
//
// # Stale but good
//
// Image resolution follows the rule of every read path in hcloudscale:
// stale but good beats fresh but failing. When a lookup after the TTL
// fails (a request error, not "not found" or "wrong architecture", which
// are answers), the image resolved before is used again and the lookup
// is retried every 30 seconds, for up to [WithMaxStale]
// ([DefaultMaxStale], 24 hours) after the last good lookup; then the error
// is returned. The first lookup after the API recovers replaces it.
// [Resolver.StaleSince] tells since when a stale image has been in use; the
// hcloudscale package exports it as a metric.
//
// The other way round, when the API refuses a cached image (a snapshot
// deleted after a newer one was published), [Resolver.Forget] drops every
// result that names it, stale or fresh, so the next lookup finds the
// newer image at once instead of after the TTL. The pool package does
// this when a create fails because its image is gone.
//
// Concurrent lookups of one spec and architecture share one request chain
// (singleflight). A caller whose context ends returns at once; the lookup
// goes on for the others under its own deadline ([WithLookupTimeout],
// [DefaultLookupTimeout]).
// [Resolver.Close] cancels lookups still running and waits for them.
package imageresolve
