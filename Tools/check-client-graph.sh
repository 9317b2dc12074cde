#!/usr/bin/env bash
# An app that is only a client links LogSyncHTTP, and with it LogSyncWire and SyncModel: none of
# them may bring in the storage (LogStore, LMDB through CLMDB, or ModelEntries, the bridge from
# the model to the logs). This script fails when one does, in either of two ways:
#
#   - the manifest: a target in LogSyncHTTP's dependencies, followed through this package's
#     targets and products, is a storage target (the chain that reaches it is printed);
#   - the sources: a file of a target in that graph imports a storage module anyway, which a
#     build can let through when another target has already built the module.
#
# It also fails when jwt-kit (identity tokens, LogSyncIdentity's alone) reaches the client, the
# engine (LogSync), the server core (LogSyncServer) or the HTTP server (LogSyncHTTPServer), by
# the manifest or by an import.
#
# Usage: Tools/check-client-graph.sh [--build] [package directory, by default this repository]
# It reads a copy of the manifest, so it neither waits for nor disturbs a build under way, and
# takes a few seconds. With --build it then also builds LogSyncHTTP in a copy of the package
# whose storage cannot build (LogStore and ModelEntries an #error, CLMDB a missing header and
# library, no lmdb for pkg-config): the proof by the compiler, at the cost of building the HTTP
# packages from scratch (minutes).
set -euo pipefail
build=false
if [ "${1:-}" = --build ]; then
    build=true
    shift
fi
root="${1:-$(dirname "$0")/..}"
root="$(cd "$root" && pwd)"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp "$root/Package.swift" "$scratch/"
(cd "$scratch" && swift package dump-package) > "$scratch/package.json"

cat > "$scratch/check.swift" <<'SWIFT'
import Foundation

let arguments = CommandLine.arguments
let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: arguments[1]))) as! [String: Any]
let root = arguments[2]
let client = "LogSyncHTTP"
let storage: Set<String> = ["LogStore", "CLMDB", "ModelEntries"]

struct Target {
    let name: String
    let directory: String
    let dependencies: [String]
    /// Products of other packages it names.
    let external: [String]
}

let productTargets = Dictionary(uniqueKeysWithValues: (manifest["products"] as! [[String: Any]]).map {
    ($0["name"] as! String, $0["targets"] as! [String])
})
let declared = (manifest["targets"] as! [[String: Any]]).map { $0["name"] as! String }
var targets: [String: Target] = [:]
for target in manifest["targets"] as! [[String: Any]] {
    let name = target["name"] as! String
    let isTest = (target["type"] as? String) == "test"
    let directory = target["path"] as? String ?? (isTest ? "Tests/\(name)" : "Sources/\(name)")
    var dependencies: [String] = []
    var external: [String] = []
    for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
        // byName: [name, condition]; target: [name, condition];
        // product: [name, package (nil: this package), aliases, condition].
        if let byName = dependency["byName"] as? [Any], let name = byName.first as? String {
            dependencies += declared.contains(name) ? [name] : productTargets[name] ?? []
        } else if let target = dependency["target"] as? [Any], let name = target.first as? String {
            dependencies.append(name)
        } else if let product = dependency["product"] as? [Any], let name = product.first as? String,
            product.count < 2 || product[1] is NSNull
        {
            dependencies += productTargets[name] ?? []
        } else if let product = dependency["product"] as? [Any], let name = product.first as? String {
            external.append(name)
        }
    }
    targets[name] = Target(name: name, directory: directory, dependencies: dependencies, external: external)
}

// Every target the client reaches, with the chain that reaches it.
var chains: [String: [String]] = [client: [client]]
var queue = [client]
while !queue.isEmpty {
    let name = queue.removeFirst()
    for dependency in targets[name]?.dependencies ?? [] where chains[dependency] == nil {
        chains[dependency] = chains[name]! + [dependency]
        queue.append(dependency)
    }
}

var failures: [String] = []
for name in storage.sorted() {
    if let chain = chains[name] {
        failures.append("the manifest: \(chain.joined(separator: " → "))")
    }
}
let importsStorage = try NSRegularExpression(
    pattern: #"^\s*(@\w+(\([^)]*\))?\s+)*import\s+(\w+\s+)?(\#(storage.sorted().joined(separator: "|")))\b"#,
    options: [.anchorsMatchLines])
for name in chains.keys.sorted() where !storage.contains(name) {
    guard let target = targets[name] else { continue }
    let directory = URL(fileURLWithPath: root).appendingPathComponent(target.directory)
    guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { continue }
    for case let file as URL in files where file.pathExtension == "swift" {
        let text = try String(contentsOf: file, encoding: .utf8)
        for match in importsStorage.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let line = text[..<Range(match.range, in: text)!.upperBound].filter { $0 == "\n" }.count + 1
            let relative = file.path.replacingOccurrences(of: root + "/", with: "")
            failures.append("the sources: \(relative):\(line) imports \(text[Range(match.range(at: 4), in: text)!]) (target \(name))")
        }
    }
}

// jwt-kit stays in LogSyncIdentity: none of these modules may reach it.
let jwtFree = ["LogSyncHTTP", "LogSync", "LogSyncServer", "LogSyncHTTPServer"]
let importsJWT = try NSRegularExpression(
    pattern: #"^\s*(@\w+(\([^)]*\))?\s+)*import\s+(\w+\s+)?(JWTKit)\b"#, options: [.anchorsMatchLines])
for module in jwtFree {
    var reached: [String: [String]] = [module: [module]]
    var pending = [module]
    while !pending.isEmpty {
        let name = pending.removeFirst()
        for dependency in targets[name]?.dependencies ?? [] where reached[dependency] == nil {
            reached[dependency] = reached[name]! + [dependency]
            pending.append(dependency)
        }
    }
    for name in reached.keys.sorted() {
        guard let target = targets[name] else { continue }
        if target.external.contains("JWTKit") {
            failures.append("the manifest: \(reached[name]!.joined(separator: " → ")) → JWTKit")
        }
        let directory = URL(fileURLWithPath: root).appendingPathComponent(target.directory)
        guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { continue }
        for case let file as URL in files where file.pathExtension == "swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            if importsJWT.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil {
                let relative = file.path.replacingOccurrences(of: root + "/", with: "")
                failures.append("the sources: \(relative) imports JWTKit (target \(name), reached from \(module))")
            }
        }
    }
}

let graph = chains.keys.filter { targets[$0] != nil }.sorted().joined(separator: ", ")
if failures.isEmpty {
    print("check-client-graph: \(client) builds on \(graph), and none of them needs storage")
    print("check-client-graph: none of \(jwtFree.joined(separator: ", ")) reaches jwt-kit")
} else {
    print("check-client-graph: \(client) must not reach storage (\(storage.sorted().joined(separator: ", "))), nor \(jwtFree.joined(separator: ", ")) jwt-kit, but:")
    for failure in failures { print("  \(failure)") }
    exit(1)
}
SWIFT

swift "$scratch/check.swift" "$scratch/package.json" "$root"
"$build" || exit 0

copy="$scratch/package"
mkdir "$copy"
(cd "$root" && tar --exclude='./.build*' --exclude=./.git -cf - .) | tar -xf - -C "$copy"
for target in LogStore ModelEntries; do
    rm -rf "${copy:?}/Sources/$target"
    mkdir "$copy/Sources/$target"
    echo "#error(\"$target is storage: a client never builds it\")" > "$copy/Sources/$target/Unavailable.swift"
done
printf 'module CLMDB [system] {\n    header "no-lmdb.h"\n    link "no-lmdb"\n    export *\n}\n' \
    > "$copy/Sources/CLMDB/module.modulemap"
rm -f "$copy/Sources/CLMDB/shim.h"
# The dependencies already checked out here, if any, save fetching them again.
if [ -d "$root/.build/checkouts" ]; then
    mkdir -p "$scratch/build"
    cp -R "$root/.build/checkouts" "$root/.build/repositories" "$root/.build/workspace-state.json" "$scratch/build/" 2>/dev/null || true
fi
echo "check-client-graph: building LogSyncHTTP in a copy without storage" >&2
(cd "$copy" && PKG_CONFIG_PATH=/nonexistent PKG_CONFIG_LIBDIR=/nonexistent \
    swift build --scratch-path "$scratch/build" --target LogSyncHTTP)
echo "check-client-graph: LogSyncHTTP built without LogStore, ModelEntries or LMDB"
