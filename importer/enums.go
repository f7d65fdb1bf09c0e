package importer

import (
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// foldEnums rewrites, in place, the enum values of n (a YAML node read as
// message md) that name a value only in another case: Envoy reads its
// configs with case-insensitive enum parsing (source/common/protobuf/
// utility.cc, MessageUtil::loadFromJson, which YAML goes through: it sets
// JsonParseOptions.case_insensitive_enum_parsing),
// so `type: strict_dns` is STRICT_DNS there. protojson is strict about
// case; other values are left for it to refuse.
func foldEnums(n *yaml.Node, md protoreflect.MessageDescriptor) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || md == nil {
		return
	}
	fields := md.Fields()
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(key))
		}
		if fd == nil {
			continue
		}
		v := deref(n.Content[i+1])
		switch {
		case fd.IsMap():
			if vd := fd.MapValue(); v.Kind == yaml.MappingNode {
				for j := 1; j < len(v.Content); j += 2 {
					foldValue(v.Content[j], vd)
				}
			}
		case fd.IsList() && v.Kind == yaml.SequenceNode:
			for _, e := range v.Content {
				foldValue(e, fd)
			}
		default:
			foldValue(v, fd)
		}
	}
}

// foldValue folds one value of field fd.
func foldValue(v *yaml.Node, fd protoreflect.FieldDescriptor) {
	v = deref(v)
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return
		}
		values := fd.Enum().Values()
		if values.ByName(protoreflect.Name(v.Value)) != nil {
			return
		}
		if up := strings.ToUpper(v.Value); values.ByName(protoreflect.Name(up)) != nil {
			v.Value = up
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		foldEnums(v, fd.Message())
	}
}
