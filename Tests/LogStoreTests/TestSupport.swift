import Foundation
import Testing

@testable import LogStore

/// A fresh directory under the system temporary directory, removed when `body` returns.
@discardableResult
func withTemporaryDirectory<R>(_ body: (URL) async throws -> R) async throws -> R {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("logstore-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

/// SplitMix64: a seedable generator so every random history can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The path of an executable built beside the test bundle (`.build/<config>/NAME`).
func builtExecutable(_ name: String) throws -> URL {
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var directory = me.deletingLastPathComponent()
    // On macOS the test binary sits inside NAME.xctest/Contents/MacOS.
    while !FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent(name).path),
        directory.path != "/"
    {
        directory.deleteLastPathComponent()
    }
    let url = directory.appendingPathComponent(name)
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        throw LogStoreError(.missingPath, "the executable \(name) was not built beside the tests")
    }
    return url
}

/// Overwrites the stored bytes of the entry at `offset` (bypassing the envelope).
func overwriteStoredEntry(_ log: Log, at offset: LogOffset, with bytes: [UInt8]) throws {
    try log.environment.write { transaction in
        try transaction.put(bytes, forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: log.entriesTable)
    }
}

/// The stored bytes of the entry at `offset`.
func storedEntry(_ log: Log, at offset: LogOffset) throws -> [UInt8] {
    try log.environment.read { transaction in
        try #require(try transaction.value(forKey: withUnsafeBytes(of: offset.key) { Array($0) }, in: log.entriesTable))
    }
}

