package redact

import (
	"fmt"
	"testing"
)

func TestJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // "" for nil
	}{
		{
			name: "create-server request",
			in:   `{"name":"pool1-abc","server_type":"cx23","user_data":"#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]","labels":{"hcloud/node-group":"pool1"}}`,
			want: `{"name":"pool1-abc","server_type":"cx23","user_data":"[redacted]","labels":{"hcloud/node-group":"pool1"}}`,
		},
		{
			name: "create-server answer with a root password",
			in:   `{"server":{"id":42,"name":"pool1-abc"},"root_password":"YItygq1v3GYjjMomLaKc","next_actions":[]}`,
			want: `{"server":{"id":42,"name":"pool1-abc"},"root_password":"[redacted]","next_actions":[]}`,
		},
		{
			name: "secret deep in arrays and objects",
			in:   `{"a":[{"b":{"token":"t1"}},{"password":"p1"}],"c":[[{"private_key":"k1"}]]}`,
			want: `{"a":[{"b":{"token":"[redacted]"}},{"password":"[redacted]"}],"c":[[{"private_key":"[redacted]"}]]}`,
		},
		{
			name: "secret value of any type is replaced whole",
			in:   `{"secret":{"nested":"s1","list":[1,2]},"token":12345,"password":null,"api_token":true,"userData":["x"]}`,
			want: `{"secret":"[redacted]","token":"[redacted]","password":"[redacted]","api_token":"[redacted]","userData":"[redacted]"}`,
		},
		{
			name: "key spelled with escapes is still recognised",
			in:   `{"us\u0065r_data":"cloud-init text"}`,
			want: `{"user_data":"[redacted]"}`,
		},
		{
			name: "case, dashes and dots in names",
			in:   `{"Root-Password":"p","X.Auth.Token":"t","SSH_PRIVATE_KEY":"k"}`,
			want: `{"Root-Password":"[redacted]","X.Auth.Token":"[redacted]","SSH_PRIVATE_KEY":"[redacted]"}`,
		},
		{
			name: "look-alikes are kept",
			in:   `{"ssh_keys":["admin"],"public_key":"ssh-ed25519 AAAA","key":"v","tokenizer":1}`,
			want: `{"ssh_keys":["admin"],"public_key":"ssh-ed25519 AAAA","key":"v","tokenizer":"[redacted]"}`,
		},
		{
			name: "duplicate keys both redacted",
			in:   `{"token":"a","token":"b"}`,
			want: `{"token":"[redacted]","token":"[redacted]"}`,
		},
		{
			name: "numbers kept as written, whitespace dropped",
			in:   "{ \"id\" : 1.50e3 ,\n \"big\": 12345678901234567890 }",
			want: `{"id":1.50e3,"big":12345678901234567890}`,
		},
		{name: "scalar document", in: `"token"`, want: `"token"`},
		{name: "empty object", in: `{}`, want: `{}`},
		{name: "empty array", in: ` [ ] `, want: `[]`},
		{name: "invalid JSON", in: `{"user_data":"abc"`},
		{name: "two documents", in: `{} {"token":"t"}`},
		{name: "empty body", in: ``},
		{name: "not JSON", in: `user_data=abc`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := JSON([]byte(tt.in))
			if tt.want == "" {
				if got != nil {
					t.Errorf("JSON(%q) = %q; want nil", tt.in, got)
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("JSON(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"user_data", true},
		{"root_password", true},
		{"password", true},
		{"token", true},
		{"private_key", true},
		{"ssh_private_key", true},
		{"client_secret", true},
		{"passphrase", true},
		{"credentials", true},
		{"apiKey", true},
		{"Authorization", true},
		{"name", false},
		{"labels", false},
		{"ssh_keys", false},
		{"public_key", false},
		{"server_type", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsSecretKey(tt.key); got != tt.want {
			t.Errorf("IsSecretKey(%q) = %v; want %v", tt.key, got, tt.want)
		}
	}
}

func ExampleJSON() {
	body := `{"name":"pool1-abc","user_data":"#cloud-config\n...","labels":{"hcloud/node-group":"pool1"}}`
	fmt.Println(string(JSON([]byte(body))))
	// Output: {"name":"pool1-abc","user_data":"[redacted]","labels":{"hcloud/node-group":"pool1"}}
}
