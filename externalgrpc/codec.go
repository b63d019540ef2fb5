package externalgrpc

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// codec is gRPC's proto codec with two fast paths for the requests the
// autoscaler's client makes per node on every loop:
//   - NodeGroupForNode: each request carries all of the node's labels and
//     annotations; the server reads the provider ID, the name and two
//     labels. Decoding only those skips the two maps, which are most of
//     the call's allocations.
//   - NodeGroupGetOptions (twice per node): each request carries the
//     autoscaler's default options, which the server reads only for a pool
//     with options of its own. For other pools (and unknown ones) only the
//     id is kept; the defaults are checked as proto.Unmarshal would, so a
//     malformed request fails alike.
//
// Every other message, and every answer, is encoded as the proto codec
// does.
type codec struct {
	encoding.CodecV2
	// group looks a pool up by id (nil: none is known): its name, and
	// whether NodeGroupGetOptions reads the defaults for it.
	group func(id []byte) (name string, found, readsDefaults bool)
}

func newCodec(group func(id []byte) (name string, found, readsDefaults bool)) codec {
	return codec{CodecV2: encoding.GetCodecV2("proto"), group: group}
}

// nodeLabels are the labels NodeGroupForNode reads (those
// [hcloudscale.Cluster.PoolForTemplateNode] looks at); decodeForNode keeps
// no others.
var nodeLabels = [...]string{config.LabelNodeGroup, hcloudscale.LabelTemplateNode}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	switch req := v.(type) {
	case *protos.NodeGroupForNodeRequest:
		return decodeForNode(b, req)
	case *protos.NodeGroupAutoscalingOptionsRequest:
		return c.decodeOptionsRequest(b, req)
	case proto.Message:
		return proto.Unmarshal(b, req)
	}
	// Messages of the older protobuf API, as the proto codec takes them.
	return c.CodecV2.Unmarshal(data, v)
}

// Field numbers of NodeGroupAutoscalingOptionsRequest.
const (
	fieldOptionsID       protowire.Number = 1
	fieldOptionsDefaults protowire.Number = 2
)

// optionsDefaults describes the defaults of a NodeGroupAutoscalingOptionsRequest.
var optionsDefaults = (&protos.NodeGroupAutoscalingOptions{}).ProtoReflect().Descriptor()

// decodeOptionsRequest fills req from its wire form as proto.Unmarshal
// would, except that the defaults are only checked, not decoded, when the
// pool named does not read them.
func (c codec) decodeOptionsRequest(b []byte, req *protos.NodeGroupAutoscalingOptionsRequest) error {
	var id []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == fieldOptionsID && typ == protowire.BytesType {
			if !utf8.Valid(v) {
				return errInvalidUTF8 // in any occurrence, as proto.Unmarshal
			}
			id = v // the last occurrence wins
		}
		return nil
	})
	if err != nil {
		return err
	}
	name, found, readsDefaults := "", false, true
	if c.group != nil {
		name, found, readsDefaults = c.group(id)
	}
	if readsDefaults {
		return proto.Unmarshal(b, req)
	}
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == fieldOptionsDefaults && typ == protowire.BytesType {
			return checkWire(v, optionsDefaults, protowire.DefaultRecursionLimit)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		name = string(id)
	}
	req.Id = name
	return nil
}

// checkWire returns an error where proto.Unmarshal would find one in b as
// a message of md, keeping nothing: in the wire format, in message fields
// and in the UTF-8 of string fields. It knows no packed repeated fields;
// the messages it checks have none.
func checkWire(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth == 0 {
		return errors.New("proto: exceeded maximum recursion depth")
	}
	fields := md.Fields()
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		fd := fields.ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			return nil // unknown, or not of the field's wire type: kept as unknown
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			return checkWire(v, fd.Message(), depth-1)
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
		}
		return nil
	})
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
		if num > protowire.MaxValidNumber {
			return errors.New("proto: field number out of range") // as proto.Unmarshal
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
