package hcloudtest

// Endpoints the API has removed answer 410 deprecated_api_endpoint with
// the announcement in details, as the API's error table describes and
// hcloud-go decodes (hcloud.ErrorDetailsDeprecatedAPIEndpoint).
const (
	// Datacenters: deprecated on 2026-06-02, answering 410 since
	// 2026-10-01 (hcloud-go's CHANGELOG).
	datacentersAnnouncement = "https://docs.hetzner.cloud/changelog#2026-06-02-datacenters-deprecated"
	// GET /actions without an id filter: removed on 2025-01-30.
	actionsListAnnouncement = "https://docs.hetzner.cloud/changelog#2025-01-30-listing-arbitrary-actions-in-the-actions-list-endpoint-is-removed"
)

func removedEndpoint(announcement string) *apiError {
	e := newError("deprecated_api_endpoint", "API functionality was removed")
	e.details = map[string]string{"announcement": announcement}
	return e
}

// handleDatacenters answers GET /datacenters and GET /datacenters/{id}.
func handleDatacenters(*Server, *request) (response, *apiError) {
	return response{}, removedEndpoint(datacentersAnnouncement)
}

// removingDatacentersAnnouncement removed the datacenter property of
// Servers and Primary IPs, in responses and request bodies, on 2026-07-01.
const removingDatacentersAnnouncement = "https://docs.hetzner.cloud/changelog#2026-07-01-removing-datacenters"

// removedFields are request properties the API has removed. The reference
// does not say what the API answers to one; the fake refuses it as
// invalid_input naming the field, so that a request relying on it fails
// in a test instead of quietly landing somewhere else (before its removal
// a datacenter chose the location).
type removedFields struct {
	Datacenter any `json:"datacenter"`
}

func (f removedFields) check(fe *fieldErrors) {
	if f.Datacenter != nil {
		fe.add("datacenter", "datacenter was removed on 2026-07-01 (%s); use location", removingDatacentersAnnouncement)
	}
}
