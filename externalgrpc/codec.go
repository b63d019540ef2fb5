package externalgrpc

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// codec is gRPC's proto codec with one fast path. The autoscaler's client
// calls NodeGroupForNode once per node on every loop, and each request
// carries all of the node's labels and annotations; the server reads the
// provider ID, the name and two labels. Decoding only those skips the two
// maps, which are most of the call's allocations. Every other message,
// and every answer, goes through the proto codec unchanged.
type codec struct {
	encoding.CodecV2
}

func newCodec() codec {
	return codec{CodecV2: encoding.GetCodecV2("proto")}
}

// nodeLabels are the labels NodeGroupForNode reads (those
// [hcloudscale.Cluster.PoolForTemplateNode] looks at); decodeForNode keeps
// no others.
var nodeLabels = [...]string{config.LabelNodeGroup, hcloudscale.LabelTemplateNode}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*protos.NodeGroupForNodeRequest)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return decodeForNode(buf.ReadOnlyData(), req)
}

// Field numbers of NodeGroupForNodeRequest and ExternalGrpcNode.
const (
	fieldRequestNode    protowire.Number = 1
	fieldNodeProviderID protowire.Number = 1
	fieldNodeName       protowire.Number = 2
	fieldNodeLabels     protowire.Number = 3
	fieldMapEntryKey    protowire.Number = 1
	fieldMapEntryValue  protowire.Number = 2
)

var errInvalidUTF8 = errors.New("string field contains invalid UTF-8")

// decodeForNode fills req from its wire form as proto.Unmarshal would,
// except that of the node's labels only [nodeLabels] are kept and its
// annotations are skipped. Occurrences of the node field are merged and
// later scalar values win, as in proto.Unmarshal.
func decodeForNode(b []byte, req *protos.NodeGroupForNodeRequest) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != fieldRequestNode || typ != protowire.BytesType {
			return nil
		}
		if req.Node == nil {
			req.Node = &protos.ExternalGrpcNode{}
		}
		return decodeNode(v, req.Node)
	})
}

func decodeNode(b []byte, n *protos.ExternalGrpcNode) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldNodeProviderID, fieldNodeName:
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
			if num == fieldNodeProviderID {
				n.ProviderID = string(v)
			} else {
				n.Name = string(v)
			}
		case fieldNodeLabels:
			var key, value []byte
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if typ != protowire.BytesType {
					return nil
				}
				switch num {
				case fieldMapEntryKey:
					key = v
				case fieldMapEntryValue:
					value = v
				}
				return nil
			})
			if err != nil {
				return err
			}
			if !utf8.Valid(key) || !utf8.Valid(value) {
				return errInvalidUTF8
			}
			for _, want := range nodeLabels {
				if string(key) == want {
					if n.Labels == nil {
						n.Labels = make(map[string]string, len(nodeLabels))
					}
					n.Labels[want] = string(value)
				}
			}
		}
		return nil
	})
}

// eachField calls fn with every field of the message b; v is the field's
// payload for length-delimited fields and nil for others, which it skips
// over after checking they are well-formed.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("proto: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("proto: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}
