#!/usr/bin/env bash
# Builds the fuzz target with libFuzzer and the address sanitizer, and runs it for a fixed
# number of inputs from a fixed seed (Docs/Testing.md, "Fuzzing"). A crash, a trap or a
# sanitizer report fails the run and leaves the input in .build-fuzz/findings.
#
#   Tools/fuzz.sh              # 20,000 inputs
#   Tools/fuzz.sh 200000       # as CI runs it
#   Tools/fuzz.sh 1000000      # a longer run
#   Tools/fuzz.sh 0            # until stopped (libFuzzer's -runs=-1)
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-20000}"
[ "$runs" = "0" ] && runs=-1
scratch=".build-fuzz"

# Coverage for libFuzzer and the address sanitizer on every module, and libFuzzer without its
# own main: SwiftPM gives an executable target an entry point of its own, which calls
# libFuzzer's driver (Tools/fuzz-decoders).
fuzzer_library="$(ls "$(dirname "$(readlink -f "$(command -v swiftc)")")"/../lib/clang/*/lib/linux/libclang_rt.fuzzer_no_main-"$(uname -m)".a | head -n 1)"
flags=(--product fuzz-decoders --scratch-path "$scratch"
    -Xswiftc -sanitize=address -Xswiftc -sanitize-coverage=edge,trace-cmp,pc-table,inline-8bit-counters
    -Xswiftc -DFUZZING -Xlinker "$fuzzer_library" -Xlinker -lstdc++)
swift build "${flags[@]}"
binary="$(swift build "${flags[@]}" --show-bin-path)/fuzz-decoders"

mkdir -p "$scratch/findings" "$scratch/corpus"
"$binary" -seed=1 -runs="$runs" -max_len=4096 -timeout=10 \
    -artifact_prefix="$scratch/findings/" "$scratch/corpus"
