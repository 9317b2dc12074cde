#!/usr/bin/env bash
# Regenerates the committed Swift code of the Protocol Buffers schemas:
#
#   Sources/SyncModel/Proto/*.proto      -> Sources/SyncModel/Proto/Generated/*.pb.swift
#   Sources/LogSyncServer/Proto/*.proto  -> Sources/LogSyncServer/Proto/Generated/*.pb.swift
#   Sources/LogSync/DeviceLog/Proto/*.proto -> Sources/LogSync/DeviceLog/Proto/Generated/*.pb.swift
#   Sources/LogSyncWire/Proto/*.proto    -> Sources/LogSyncWire/Proto/Generated/*.pb.swift
#
# Usage: Tools/generate-protos.sh   (from anywhere; idempotent)
#
# Installs protoc (Debian's protobuf-compiler) if it is missing, builds protoc-gen-swift from the
# swift-protobuf version the package resolves to (once, into .build-protoc), then runs protoc.
# Generated types are `package`, not public API. The server's and the device's schemas import
# model.proto; the module mappings in Tools/proto-module-mappings.asciipb make the generated
# server and engine code import SyncModel instead of redefining its types. See Docs/Protobuf.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scratch=".build-protoc"
mappings="Tools/proto-module-mappings.asciipb"
model_dir="Sources/SyncModel/Proto"
server_dir="Sources/LogSyncServer/Proto"
device_dir="Sources/LogSync/DeviceLog/Proto"
wire_dir="Sources/LogSyncWire/Proto"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# 1. protoc.
if ! command -v protoc >/dev/null 2>&1; then
    echo "generate-protos: installing protobuf-compiler" >&2
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler
fi

# 2. protoc-gen-swift, built from this package's swift-protobuf dependency. Rebuilt only when it
#    is missing or its version differs from the resolved swift-protobuf version.
plugin="$scratch/release/protoc-gen-swift"
wanted=""
if [ -f Package.resolved ]; then
    wanted="$(sed -n '/"identity" : "swift-protobuf"/,/"version"/s/.*"version" : "\(.*\)".*/\1/p' Package.resolved)"
fi
have=""
if [ -x "$plugin" ]; then
    have="$("$plugin" --version 2>/dev/null | awk '{print $NF}')"
fi
if [ -z "$have" ] || { [ -n "$wanted" ] && [ "$have" != "$wanted" ]; }; then
    echo "generate-protos: building protoc-gen-swift ${wanted:-(resolved version)} into $scratch" >&2
    swift build -c release --product protoc-gen-swift --scratch-path "$scratch"
fi

# 3. Generate. Old output is removed first so that a deleted .proto leaves no stale code.
generate() {  # generate OUT_DIR INCLUDE_DIRS... -- FILES... (extra swift options in $extra)
    local out="$1"; shift
    mkdir -p "$out"
    rm -f "$out"/*.pb.swift
    protoc --plugin=protoc-gen-swift="$plugin" \
        --swift_out="$out" \
        --swift_opt=Visibility=Package \
        --swift_opt=FileNaming=DropPath \
        "$@"
}

shopt -s nullglob
model_protos=("$model_dir"/*.proto)
server_protos=("$server_dir"/*.proto)
device_protos=("$device_dir"/*.proto)
wire_protos=("$wire_dir"/*.proto)
# A schema folder that moved must not be skipped quietly: its generated code would go stale.
for dir in "$model_dir" "$server_dir" "$device_dir" "$wire_dir"; do
    compgen -G "$dir/*.proto" >/dev/null || { echo "generate-protos: no .proto in $dir" >&2; exit 1; }
done

generate "$model_dir/Generated" -I "$model_dir" "${model_protos[@]}"
if [ ${#server_protos[@]} -gt 0 ]; then
    generate "$server_dir/Generated" -I "$model_dir" -I "$server_dir" \
        --swift_opt=ProtoPathModuleMappings="$mappings" "${server_protos[@]}"
fi
if [ ${#device_protos[@]} -gt 0 ]; then
    generate "$device_dir/Generated" -I "$model_dir" -I "$device_dir" \
        --swift_opt=ProtoPathModuleMappings="$mappings" "${device_protos[@]}"
fi

if [ ${#wire_protos[@]} -gt 0 ]; then
    generate "$wire_dir/Generated" -I "$model_dir" -I "$wire_dir" \
        --swift_opt=ProtoPathModuleMappings="$mappings" "${wire_protos[@]}"
fi

echo "generate-protos: protoc $(protoc --version | awk '{print $NF}'), $("$plugin" --version)" >&2
for file in "$model_dir"/Generated/*.pb.swift "$server_dir"/Generated/*.pb.swift "$device_dir"/Generated/*.pb.swift \
    "$wire_dir"/Generated/*.pb.swift; do
    echo "  $file"
done
