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
// Concurrent lookups of one spec and architecture share one request chain
// (singleflight). A caller whose context ends returns at once; the lookup
// goes on for the others under its own deadline ([WithLookupTimeout],
// [DefaultLookupTimeout]).
// [Resolver.Close] cancels lookups still running and waits for them.
package imageresolve
