package servercache

import (
	"context"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// listAll reads every server that matches the selector, page by page, so
// that a server cannot be missed when servers come and go during the
// listing.
//
// Pages are numbered, so when a server on a page already read is deleted,
// every later server moves up one place and the first server of the next
// page slides onto the page before, unseen. Pages are sorted by ID, so a
// new server (IDs only grow) goes to the end and moves nothing.
// Contiguous reading is therefore safe while meta.pagination.total_entries
// stays the same. When it changes between two requests, the page just
// read is kept but trusted no further than the last ID read before:
// listAll steps back one page at a time until a page starts at or below
// that ID (or page 1 is reached), then reads forward again, dropping
// servers it has already seen.
//
// A deletion and a creation between the same two requests leave the total
// unchanged and go unnoticed; the next listing shows the server.
//
// It returns the servers and the number of requests made.
func (c *Cache) listAll(ctx context.Context) ([]*hcloud.Server, int, error) {
	var (
		out      []*hcloud.Server
		seen     = make(map[int64]struct{})
		page     = 1
		requests = 0
		// hi is the highest ID up to which every server has been read;
		// 0 before page 1.
		hi int64
		// prevPage and prevTotal describe the last request; prevHi says
		// whether it extended hi to its last server.
		prevPage, prevTotal = 0, -1
		prevHi              bool
		steps               = 0 // requests that were not a step forward
	)
	for {
		servers, resp, err := c.client.List(ctx, hcloud.ServerListOpts{
			ListOpts: hcloud.ListOpts{Page: page, PerPage: pageSize, LabelSelector: c.selector},
			Sort:     []string{"id:asc"},
		})
		requests++
		if err != nil {
			return nil, requests, fmt.Errorf("page %d: %w", page, err)
		}
		total, next := -1, 0
		if resp != nil && resp.Meta.Pagination != nil {
			total, next = resp.Meta.Pagination.TotalEntries, resp.Meta.Pagination.NextPage
		}
		for _, s := range servers {
			if s == nil {
				continue
			}
			if _, ok := seen[s.ID]; !ok {
				seen[s.ID] = struct{}{}
				out = append(out, s)
			}
		}

		// The page joins what has been read completely if nothing before
		// it can be missing: it is page 1, it reaches back to hi, or it
		// follows the previous page with no change in between.
		changed := prevTotal >= 0 && total != prevTotal
		joins := page == 1 ||
			(len(servers) > 0 && servers[0] != nil && servers[0].ID <= hi) ||
			(!changed && prevPage == page-1 && prevHi)
		prevPage, prevTotal, prevHi = page, total, false
		if !joins {
			if steps++; steps > maxListingSteps {
				return nil, requests, fmt.Errorf("servers kept changing during the listing: %d pages read again", steps)
			}
			page--
			continue
		}
		if n := len(servers); n > 0 && servers[n-1] != nil {
			hi = max(hi, servers[n-1].ID)
		}
		prevHi = true
		if next == 0 {
			return out, requests, nil
		}
		page++
	}
}

// maxListingSteps bounds the pages read again in one listing; a project
// that changes faster than the listing can page fails it, and the next
// listing (after the failure backoff) tries again.
const maxListingSteps = 100
