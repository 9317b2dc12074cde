import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

@Suite("Map growth")
struct MapGrowthTests {
    @Test func appendsGrowATinyMapAndLoseNothing() async throws {
        try withTemporaryDirectory { directory in
            let initial = 64 << 10
            let log = try Log.open(
                at: directory, options: .init(durability: .fast, initialMapSize: initial),
                projections: [LatestValueProjection()])
            var random = SeededRandom(seed: 7)
            var expected: [[UInt8]] = []
            // Thousands of entries one by one, then in batches, some larger than a page.
            for i in 0..<3000 {
                let size = i % 97 == 0 ? 5000 : Int.random(in: 1...200, using: &random)
                let value = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
                expected.append(value)
                try log.append(KeyValueEntry.set(key: "k\(i % 50)", value: value).newEntry)
            }
            for _ in 0..<20 {
                let batch = (0..<500).map { _ in (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) } }
                expected += batch
                try log.append(
                    batch.enumerated().map { KeyValueEntry.set(key: "b\($0.offset)", value: $0.element).newEntry })
            }
            #expect(log.environment.mapSize > initial * 16)
            #expect(try log.lastOffset == LogOffset(UInt64(expected.count)))
            var index = 0
            try log.forEachEntry { entry in
                guard case .set(_, let value) = KeyValueEntry(entry) else {
                    Issue.record("entry \(entry.offset) does not decode")
                    return
                }
                #expect(value == expected[index])
                index += 1
            }
            #expect(index == expected.count)
            #expect(try log.verifyProjections() == nil)
        }
    }

    @Test func oneTransactionLargerThanTheMapGrowsItSeveralTimes() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast, initialMapSize: 64 << 10))
            let entries = (0..<4000).map {
                NewEntry(kind: 1, payload: [UInt8](repeating: UInt8($0 % 256), count: 1000))
            }
            #expect(try log.append(entries) == LogOffset(1)..<LogOffset(4001))
            #expect(try log.entry(at: 4000)?.payload.first == UInt8(3999 % 256))
        }
    }

    @Test func growthStopsAtTheConfiguredMaximum() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(
                at: directory, options: .init(durability: .fast, initialMapSize: 64 << 10, maximumMapSize: 256 << 10))
            try log.append(NewEntry(kind: 1, payload: [1]))
            #expect {
                try log.append(NewEntry(kind: 1, payload: [UInt8](repeating: 0, count: 1 << 20)))
            } throws: { error in
                (error as? LogStoreError)?.code == .mapFull && "\(error)".contains("maximum")
            }
            // What was acknowledged is still there, and the log still takes appends that fit.
            #expect(try log.entry(at: 1)?.payload == [1])
            #expect(try log.append(NewEntry(kind: 1, payload: [2])) == 2)
        }
    }

    @Test func aSecondProcessSeesTheGrownMap() async throws {
        // Another environment handle on the same file stands in for another process: reopen
        // read-only after a writer grew the map far past the reader's initial size.
        try withTemporaryDirectory { directory in
            do {
                let log = try Log.open(at: directory, options: .init(durability: .fast, initialMapSize: 64 << 10))
                try log.append((0..<2000).map { _ in NewEntry(kind: 1, payload: [UInt8](repeating: 1, count: 2000)) })
            }
            let reader = try Log.open(
                at: directory, options: .init(durability: .fast, readOnly: true, initialMapSize: 64 << 10))
            #expect(try reader.lastOffset == 2000)
            #expect(try reader.entry(at: 2000)?.payload.count == 2000)
        }
    }
}
