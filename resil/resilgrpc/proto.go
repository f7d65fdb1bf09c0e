package resilgrpc

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/retrystorm/retrystorm/resil"
)

func protoIdempotency(fullMethod string) (resil.Idempotency, bool) {
	name := strings.TrimPrefix(fullMethod, "/")
	svc, meth, ok := strings.Cut(name, "/")
	if !ok {
		return resil.IdempotencyUnset, false
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return resil.IdempotencyUnset, false
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return resil.IdempotencyUnset, false
	}
	md := sd.Methods().ByName(protoreflect.Name(meth))
	if md == nil {
		return resil.IdempotencyUnset, false
	}
	opts, _ := md.Options().(*descriptorpb.MethodOptions)
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return resil.Idempotent, true
	}
	return resil.NotIdempotent, true
}
