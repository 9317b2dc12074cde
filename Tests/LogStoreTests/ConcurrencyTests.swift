import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

@Suite("Concurrent readers and one writer")
struct ConcurrencyTests {
    static func payload(_ offset: UInt64) -> [UInt8] {
        // Depends only on the offset, so a reader can check every entry it sees.
        let size = Int(offset % 37) * 10
        return (0..<size).map { UInt8(truncatingIfNeeded: offset &+ UInt64($0)) }
    }

    @Test func readersSeeConsistentPrefixesWhileTheMapGrows() async throws {
        try await withTemporaryDirectory { directory in
            // A small map: the writer grows it several times while readers hold snapshots.
            let log = try Log.open(
                at: directory, options: .init(durability: .fast, initialMapSize: 128 << 10),
                projections: [LatestValueProjection()])
            let total: UInt64 = 20_000
            let writer = Task.detached {
                var next: UInt64 = 1
                var random = SeededRandom(seed: 11)
                while next <= total {
                    let size = min(total - next + 1, UInt64.random(in: 1...300, using: &random))
                    try log.append(
                        (next..<(next + size)).map {
                            KeyValueEntry.set(key: "k\($0 % 100)", value: Self.payload($0)).newEntry
                        })
                    next += size
                }
            }
            let readers = (0..<4).map { reader in
                Task.detached {
                    var snapshots = 0
                    var lastSeen = LogOffset.zero
                    while lastSeen.rawValue < total {
                        // One snapshot: the entries, the projection and its counts agree.
                        try log.read { snapshot in
                            let last = try snapshot.lastOffset
                            #expect(last >= lastSeen, "reader \(reader) went back in time")
                            #expect(try snapshot.appliedOffset(of: "latest") == last)
                            let counts = try snapshot.table("counts", of: "latest")
                            let sets = try snapshot.transaction.value(forKey: [0, 1], in: counts)
                            #expect((sets.map(LatestValueProjection.decodeUInt64) ?? 0) == last.rawValue)
                            if last > .zero {
                                let entry = try #require(try snapshot.entry(at: last))
                                #expect(
                                    KeyValueEntry(entry)
                                        == .set(key: "k\(last.rawValue % 100)", value: Self.payload(last.rawValue)))
                            }
                            lastSeen = last
                        }
                        // A lazy pass over a stretch of the prefix, chunk by chunk.
                        var expected = LogOffset(lastSeen.rawValue > 1500 ? lastSeen.rawValue - 1500 : 1)
                        var cursor = try log.entries(from: expected, through: lastSeen)
                        while let entry = try cursor.next() {
                            #expect(entry.offset == expected)
                            #expect(
                                KeyValueEntry(entry)
                                    == .set(key: "k\(expected.rawValue % 100)", value: Self.payload(expected.rawValue)))
                            expected = expected.next
                        }
                        snapshots += 1
                        await Task.yield()
                    }
                    return snapshots
                }
            }
            try await writer.value
            for reader in readers { #expect(try await reader.value > 0) }
            #expect(log.environment.mapSize > 128 << 10)
            #expect(try log.verifyProjections() == nil)
        }
    }
}
