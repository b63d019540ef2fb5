package hcloudtest

import (
	"net/http"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// powerTransition describes a power action: the status while it runs and
// after it succeeds. On failure the server returns to the status it had.
type powerTransition struct {
	command string
	during  string
	after   string
}

var (
	powerOn  = powerTransition{command: "start_server", during: statusStarting, after: statusRunning}
	powerOff = powerTransition{command: "stop_server", during: statusStopping, after: statusOff}
	shutdown = powerTransition{command: "shutdown_server", during: statusStopping, after: statusOff}
	reboot   = powerTransition{command: "reboot_server", during: statusRunning, after: statusRunning}
	reset    = powerTransition{command: "reset_server", during: statusRunning, after: statusRunning}
)

// serverActionTarget loads the server of a server action and refuses it
// while another action runs on the server, as the API does with locked.
func (s *Server) serverActionTarget(r *request) (*serverRec, *apiError) {
	srv, err := s.serverFromPath(r)
	if err != nil {
		return nil, err
	}
	if srv.status == statusDeleting || s.st.lockedBy("server", srv.id) {
		return nil, newError("locked", "server %d is locked: another action is running", srv.id)
	}
	return srv, nil
}

func handlePower(t powerTransition) handlerFunc {
	return func(s *Server, r *request) (response, *apiError) {
		srv, err := s.serverActionTarget(r)
		if err != nil {
			return response{}, err
		}
		prev := srv.status
		srv.status = t.during
		a := s.st.startAction(t.command, r.now, nil, ref("server", srv.id))
		a.onSuccess = func() {
			if srv.status == t.during {
				srv.status = t.after
			}
		}
		a.onError = func() {
			if srv.status == t.during {
				srv.status = prev
			}
		}
		return response{status: http.StatusCreated, body: schema.ServerActionPoweronResponse{Action: a.schema(r.now)}}, nil
	}
}

func handleAttachToNetwork(s *Server, r *request) (response, *apiError) {
	srv, err := s.serverActionTarget(r)
	if err != nil {
		return response{}, err
	}
	var req schema.ServerActionAttachToNetworkRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	if req.Network == 0 {
		return response{}, invalidField("network", "Missing data for required field.")
	}
	network, ok := s.st.networks[req.Network]
	if !ok {
		return response{}, notFound("network")
	}
	for _, pn := range srv.privateNets {
		if pn.Network == req.Network {
			return response{}, newError("server_already_attached", "server %d is already attached to network %d", srv.id, req.Network)
		}
	}
	var ip, ipRange string
	if req.IP != nil {
		ip = *req.IP
	}
	if req.IPRange != nil {
		ipRange = *req.IPRange
	}
	zone := s.st.locationByID(srv.locationID).NetworkZone
	pn, apiErr := s.st.allocatePrivateIP(network, zone, ip, ipRange)
	if apiErr != nil {
		return response{}, apiErr
	}
	for _, alias := range req.AliasIPs {
		if alias != nil {
			pn.AliasIPs = append(pn.AliasIPs, *alias)
		}
	}
	srv.privateNets = append(srv.privateNets, pn)
	a := s.st.startAction("attach_to_network", r.now, nil, ref("server", srv.id), ref("network", network.ID))
	a.onError = func() { srv.detach(network.ID) }
	return response{status: http.StatusCreated, body: schema.ServerActionAttachToNetworkResponse{Action: a.schema(r.now)}}, nil
}

func handleDetachFromNetwork(s *Server, r *request) (response, *apiError) {
	srv, err := s.serverActionTarget(r)
	if err != nil {
		return response{}, err
	}
	var req schema.ServerActionDetachFromNetworkRequest
	if err := decodeBody(r, &req); err != nil {
		return response{}, err
	}
	attached := false
	for _, pn := range srv.privateNets {
		attached = attached || pn.Network == req.Network
	}
	if !attached {
		return response{}, newError("invalid_input", "server %d is not attached to network %d", srv.id, req.Network)
	}
	a := s.st.startAction("detach_from_network", r.now, nil, ref("server", srv.id), ref("network", req.Network))
	network := req.Network
	a.onSuccess = func() { srv.detach(network) }
	return response{status: http.StatusCreated, body: schema.ServerActionDetachFromNetworkResponse{Action: a.schema(r.now)}}, nil
}
