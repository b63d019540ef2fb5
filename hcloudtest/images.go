package hcloudtest

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

func (st *state) renderImage(img *schema.Image) schema.Image {
	out := *img
	out.Labels = maps.Clone(img.Labels)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	return out
}

func imageName(img *schema.Image) string {
	if img.Name == nil {
		return ""
	}
	return *img.Name
}

func imageCreated(img *schema.Image) int64 {
	if img.Created == nil {
		return 0
	}
	return img.Created.UnixNano()
}

var imageSorts = map[string]func(a, b *schema.Image) int{
	"id":          func(a, b *schema.Image) int { return cmp.Compare(a.ID, b.ID) },
	"name":        func(a, b *schema.Image) int { return cmp.Compare(imageName(a), imageName(b)) },
	"description": func(a, b *schema.Image) int { return cmp.Compare(a.Description, b.Description) },
	"created":     func(a, b *schema.Image) int { return cmp.Compare(imageCreated(a), imageCreated(b)) },
}

func handleGetImage(s *Server, r *request) (response, *apiError) {
	id, err := pathID(r, "id")
	if err != nil {
		return response{}, err
	}
	img, ok := s.st.images[id]
	if !ok {
		return response{}, notFound("image")
	}
	return ok200(schema.ImageGetResponse{Image: s.st.renderImage(img)}), nil
}

// handleListImages answers GET /images with the API's filters. Deprecated
// images are left out unless include_deprecated=true.
func handleListImages(s *Server, r *request) (response, *apiError) {
	sel, err := selectorQuery(r)
	if err != nil {
		return response{}, err
	}
	q := r.query
	name := q.Get("name")
	types, statuses, archs := q["type"], q["status"], q["architecture"]
	includeDeprecated := false
	if v := q.Get("include_deprecated"); v != "" {
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return response{}, invalidField("include_deprecated", "must be true or false")
		}
		includeDeprecated = b
	}
	var boundTo int64
	if v := q.Get("bound_to"); v != "" {
		id, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return response{}, invalidField("bound_to", "must be an integer")
		}
		boundTo = id
	}
	var list []*schema.Image
	for _, img := range s.st.images {
		switch {
		case name != "" && imageName(img) != name,
			len(types) > 0 && !slices.Contains(types, img.Type),
			len(statuses) > 0 && !slices.Contains(statuses, img.Status),
			len(archs) > 0 && !slices.Contains(archs, img.Architecture),
			!includeDeprecated && img.Deprecated != nil,
			boundTo != 0 && (img.BoundTo == nil || *img.BoundTo != boundTo),
			!sel.matches(img.Labels):
			continue
		}
		list = append(list, img)
	}
	if err := sortList(list, q["sort"], imageSorts); err != nil {
		return response{}, err
	}
	page, m, err := paginate(r, list)
	if err != nil {
		return response{}, err
	}
	out := make([]schema.Image, len(page))
	for i, img := range page {
		out[i] = s.st.renderImage(img)
	}
	return ok200(map[string]any{"images": out, "meta": m}), nil
}
