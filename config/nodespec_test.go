package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseNodeSpec(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    NodeSpec
		wantErr []string // substrings, one per expected problem
	}{
		{name: "upstream example", in: "1:10:CPX51:FSN1:pool1", want: NodeSpec{MinSize: 1, MaxSize: 10, ServerType: "cpx51", Location: "fsn1", Name: "pool1"}},
		{name: "min zero allowed", in: "0:3:cx22:nbg1:workers", want: NodeSpec{MinSize: 0, MaxSize: 3, ServerType: "cx22", Location: "nbg1", Name: "workers"}},
		{name: "min equals max", in: "2:2:cax11:hel1:arm", want: NodeSpec{MinSize: 2, MaxSize: 2, ServerType: "cax11", Location: "hel1", Name: "arm"}},
		{name: "name of 46 characters fits", in: "0:1:cx22:fsn1:" + strings.Repeat("a", 46), want: NodeSpec{MaxSize: 1, ServerType: "cx22", Location: "fsn1", Name: strings.Repeat("a", 46)}},
		{name: "upstream: sizes with sign parse as integers", in: "+1:+2:cx22:fsn1:p", want: NodeSpec{MinSize: 1, MaxSize: 2, ServerType: "cx22", Location: "fsn1", Name: "p"}},

		{name: "upstream: colon belongs to the name, which is then invalid", in: "1:2:cx22:fsn1:a:b", wantErr: []string{`pool name "a:b" contains ':'`}},
		{name: "four fields", in: "1:2:cx22:fsn1", wantErr: []string{"has 4 fields, expected format <min>:<max>:<type>:<location>:<pool>"}},
		{name: "empty", in: "", wantErr: []string{"has 1 fields"}},
		{name: "min not integer", in: "a:2:cx22:fsn1:p", wantErr: []string{`min size "a" is not an integer`}},
		{name: "max not integer", in: "1:b:cx22:fsn1:p", wantErr: []string{`max size "b" is not an integer`}},
		{name: "negative min", in: "-1:2:cx22:fsn1:p", wantErr: []string{"min size -1 is negative"}},
		{name: "max below zero", in: "0:-2:cx22:fsn1:p", wantErr: []string{"max size -2 is negative"}},
		{name: "min above max", in: "3:2:cx22:fsn1:p", wantErr: []string{"min size 3 is greater than max size 2"}},
		{name: "empty type", in: "1:2::fsn1:p", wantErr: []string{"server type is empty"}},
		{name: "empty location", in: "1:2:cx22::p", wantErr: []string{"location is empty"}},
		{name: "space in type", in: "1:2:cx 22:fsn1:p", wantErr: []string{`server type "cx 22" contains whitespace`}},
		{name: "empty name", in: "1:2:cx22:fsn1:", wantErr: []string{"pool name is empty"}},
		{name: "underscore in name", in: "1:2:cx22:fsn1:my_pool", wantErr: []string{`contains '_'`}},
		{name: "upper case in name", in: "1:2:cx22:fsn1:Pool1", wantErr: []string{`did you mean "pool1"`}},
		{name: "name ends with dash", in: "1:2:cx22:fsn1:pool-", wantErr: []string{"must start and end with a letter or digit"}},
		{name: "name of 47 characters too long", in: "1:2:cx22:fsn1:" + strings.Repeat("a", 47), wantErr: []string{"47 characters long, at most 46"}},
		{name: "every problem at once", in: "x:-1::fsn1:A_", wantErr: []string{`min size "x"`, "max size -1 is negative", "server type is empty", `pool name "A_"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNodeSpec(tt.in)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ParseNodeSpec(%q) error = %v; want nil", tt.in, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ParseNodeSpec(%q) (-want +got):\n%s", tt.in, diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseNodeSpec(%q) = %+v, nil; want errors %q", tt.in, got, tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseNodeSpec(%q) error = %q; want it to contain %q", tt.in, err, w)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tt.wantErr) {
				t.Errorf("ParseNodeSpec(%q) reported %d problems; want %d:\n%v", tt.in, n, len(tt.wantErr), err)
			}
			if got != (NodeSpec{}) {
				t.Errorf("ParseNodeSpec(%q) = %+v with an error; want the zero NodeSpec", tt.in, got)
			}
		})
	}
}
