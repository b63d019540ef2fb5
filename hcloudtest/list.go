package hcloudtest

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Pagination limits of the API.
const (
	DefaultPerPage = 25
	MaxPerPage     = 50
)

// pagination is meta.pagination. The API sends null for a missing
// previous or next page, hence the pointers.
type pagination struct {
	Page         int  `json:"page"`
	PerPage      int  `json:"per_page"`
	PreviousPage *int `json:"previous_page"`
	NextPage     *int `json:"next_page"`
	LastPage     *int `json:"last_page"`
	TotalEntries *int `json:"total_entries"`
}

type meta struct {
	Pagination pagination `json:"pagination"`
}

func ok200(body any) response { return response{status: http.StatusOK, body: body} }

func intQuery(r *request, name string, def int) (int, *apiError) {
	v := r.query.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, invalidField(name, "must be a positive integer")
	}
	return n, nil
}

// paginate cuts one page out of list. per_page above the maximum is
// capped to it; a page past the end is empty.
func paginate[T any](r *request, list []T) ([]T, meta, *apiError) {
	page, err := intQuery(r, "page", 1)
	if err != nil {
		return nil, meta{}, err
	}
	perPage, err := intQuery(r, "per_page", DefaultPerPage)
	if err != nil {
		return nil, meta{}, err
	}
	perPage = min(perPage, MaxPerPage)
	total := len(list)
	last := max(1, (total+perPage-1)/perPage)
	p := pagination{Page: page, PerPage: perPage, LastPage: &last, TotalEntries: &total}
	if page > 1 {
		prev := min(page-1, last)
		p.PreviousPage = &prev
	}
	if page < last {
		next := page + 1
		p.NextPage = &next
	}
	start := min((page-1)*perPage, total)
	end := min(start+perPage, total)
	return list[start:end], meta{Pagination: p}, nil
}

// sortList sorts list by the API's sort parameters ("field", "field:asc",
// "field:desc", repeatable); ties fall back to ascending ID order, which
// is also the order without sort parameters.
func sortList[T any](list []T, sorts []string, fields map[string]func(a, b T) int) *apiError {
	type key struct {
		cmp  func(a, b T) int
		desc bool
	}
	var keys []key
	for _, s := range sorts {
		field, dir, _ := strings.Cut(s, ":")
		f, ok := fields[field]
		if !ok || (dir != "" && dir != "asc" && dir != "desc") {
			return invalidField("sort", "%q is not a valid sort; fields: %s with an optional :asc or :desc", s, strings.Join(sortedKeys(fields), ", "))
		}
		keys = append(keys, key{cmp: f, desc: dir == "desc"})
	}
	keys = append(keys, key{cmp: fields["id"]})
	slices.SortStableFunc(list, func(a, b T) int {
		for _, k := range keys {
			c := k.cmp(a, b)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// selectorQuery parses the label_selector parameter.
func selectorQuery(r *request) (selector, *apiError) {
	sel, err := parseSelector(r.query.Get("label_selector"))
	if err != nil {
		return nil, invalidField("label_selector", "%v", err)
	}
	return sel, nil
}

// setPaginationLink sets the Link header the API sends with a page of a
// list: the previous, next and last pages as absolute URLs that keep the
// request's other parameters.
func setPaginationLink(h http.Header, endpoint string, query url.Values, out outcome) {
	if out.err != nil || out.fault != nil {
		return
	}
	body, ok := out.resp.body.(map[string]any)
	if !ok {
		return
	}
	m, ok := body["meta"].(meta)
	if !ok {
		return
	}
	var links []string
	add := func(page *int, rel string) {
		if page == nil {
			return
		}
		q := maps.Clone(query)
		if q == nil {
			q = url.Values{}
		}
		q.Set("page", strconv.Itoa(*page))
		q.Set("per_page", strconv.Itoa(m.Pagination.PerPage))
		links = append(links, fmt.Sprintf("<%s?%s>; rel=%q", endpoint, q.Encode(), rel))
	}
	add(m.Pagination.PreviousPage, "prev")
	add(m.Pagination.NextPage, "next")
	add(m.Pagination.LastPage, "last")
	h.Set("Link", strings.Join(links, ", "))
}
