package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// auditPolicy records every request once, when its answer is complete,
// with its metadata; for Leases also the objects, so that the holder of a
// Lease at any time can be read from the log.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: RequestResponse
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
`

// AuditEvent is one request as the audit log records it.
type AuditEvent struct {
	// Stage is ResponseComplete for every answered request;
	// ResponseStarted for the start of a long-running one (a watch), and
	// Panic for a request whose handler panicked.
	Stage string
	// User and Groups are who made the request.
	User      string
	Groups    []string
	UserAgent string
	// Verb is the Kubernetes verb: get, list, watch, create, update,
	// patch, delete, ...
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	RequestURI  string
	// Code is the HTTP status of the answer (0 when none was recorded).
	Code int
	// Received is when the request arrived, Completed when the stage
	// was reached (for ResponseComplete: when the answer was ready).
	Received  time.Time
	Completed time.Time
	// RequestObject and ResponseObject are the objects sent and answered,
	// recorded only for Leases.
	RequestObject  json.RawMessage
	ResponseObject json.RawMessage
}

// auditLine is the JSON of one line of the audit log (audit.k8s.io/v1
// Event), the fields the harness reads.
type auditLine struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage `json:"requestObject"`
	ResponseObject           json.RawMessage `json:"responseObject"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time       `json:"stageTimestamp"`
}

// AuditEvents returns every request logged so far, in the order the log
// has them (about the order of completion). The log is written before
// each answer, so every request answered so far is in it.
func (s *Server) AuditEvents(t testing.TB) []AuditEvent {
	t.Helper()
	events, err := readAudit(s.auditLog)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	return events
}

func readAudit(path string) ([]AuditEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(data, []byte("\n"))
	// The part after the last newline is empty, or a line still being
	// written.
	lines = lines[:len(lines)-1]
	out := make([]AuditEvent, 0, len(lines))
	for n, line := range lines {
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n+1, err)
		}
		e := AuditEvent{
			Stage:          l.Stage,
			User:           l.User.Username,
			Groups:         l.User.Groups,
			UserAgent:      l.UserAgent,
			Verb:           l.Verb,
			RequestURI:     l.RequestURI,
			Received:       l.RequestReceivedTimestamp,
			Completed:      l.StageTimestamp,
			RequestObject:  l.RequestObject,
			ResponseObject: l.ResponseObject,
		}
		if r := l.ObjectRef; r != nil {
			e.APIGroup, e.Resource, e.Subresource, e.Namespace, e.Name = r.APIGroup, r.Resource, r.Subresource, r.Namespace, r.Name
		}
		if l.ResponseStatus != nil {
			e.Code = l.ResponseStatus.Code
		}
		out = append(out, e)
	}
	return out, nil
}
