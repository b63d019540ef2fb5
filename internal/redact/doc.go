// Package redact logs Hetzner Cloud API traffic at debug level without
// its secrets.
//
// hcloud-go's own debug output (hcloud.WithDebugWriter) masks the
// Authorization header but dumps bodies whole, and a create-server request
// carries the cloud-init user data, which holds the cluster's join token;
// the answer to it may carry a root password. Do not enable it; use
// [NewDebugTransport] in the client's HTTP transport instead:
//
//	hcloud-go handlers -> instrumentation -> pacer -> NewDebugTransport -> http.Transport
//
// # What is logged
//
// One debug entry per request ("api request": method, path and query,
// body) and one per answer ("api response": the same plus status,
// duration and X-Correlation-Id), or "api request failed" with the
// error. Headers are never logged, so the token never is. JSON bodies are
// logged after [JSON] has replaced the value of every secret field with
// [Redacted]; other bodies, bodies that do not parse and bodies over 1 MiB
// are logged by length only (bodyBytes, -1 when unknown).
//
// # Secret fields
//
// A field is secret when its name, lower-cased and stripped of "_", "-"
// and ".", contains one of password, passwd, passphrase, secret, token,
// credential, apikey, privatekey, userdata, authorization or cookie
// ([IsSecretKey]). That covers user_data, root_password, the password of
// storage boxes, the private_key of certificates and any token, at any
// depth, in requests and answers, whatever the value's type: a redacted
// object is replaced whole. Secrets in the values of other fields (a
// token pasted into a label or a server name) are not recognised.
//
// # Cost
//
// When the logger does not enable debug level, [NewDebugTransport] passes
// requests straight on: no body is read or copied and nothing is
// allocated. When it does, bodies are read into memory once, as hcloud-go
// does anyway, and replayed to the caller.
package redact
