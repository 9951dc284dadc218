"""Generated Protobuf modules live in qim.proto.v1."""
