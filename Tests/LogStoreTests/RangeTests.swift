import Foundation
import TemporaryDirectory
import Testing

@testable import LogStore

@Suite("Range iteration")
struct RangeTests {
    func payload(_ offset: UInt64) -> [UInt8] { withUnsafeBytes(of: offset.bigEndian) { Array($0) } }

    @Test func cursorsVisitExactlyTheRange() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            try log.append((1...3000).map { NewEntry(kind: 1, payload: payload($0)) })
            for (from, through) in [(1, 3000), (1, 1), (1024, 1025), (2999, 3000), (500, 2600), (3000, 3000)] {
                var seen: [UInt64] = []
                try log.forEachEntry(from: LogOffset(UInt64(from)), through: LogOffset(UInt64(through))) { entry in
                    #expect(entry.payload == payload(entry.offset.rawValue))
                    seen.append(entry.offset.rawValue)
                }
                #expect(seen == Array(UInt64(from)...UInt64(through)))
            }
            var empty = try log.entries(from: 10, through: 9)
            #expect(try empty.next() == nil)
            // Without an end, a cursor stops at the last offset when it was created.
            var cursor = try log.entries(from: 2999)
            try log.append(NewEntry(kind: 1, payload: payload(3001)))
            #expect(try cursor.next()?.offset == 2999)
            #expect(try cursor.next()?.offset == 3000)
            #expect(try cursor.next() == nil)
        }
    }

    @Test func aCursorPastTheEndReportsTheMissingOffset() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            try log.append((1...10).map { NewEntry(kind: 1, payload: payload($0)) })
            var cursor = try log.entries(from: 5, through: 20)
            #expect { while try cursor.next() != nil {} } throws: { error in
                (error as? LogStoreError)?.code == .corruptEntry && (error as? LogStoreError)?.offset == 11
            }
        }
    }

    @Test func memoryDoesNotGrowWithTheRange() async throws {
        try withTemporaryDirectory { directory in
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            let big = [UInt8](repeating: 1, count: 64 << 10)
            for _ in 0..<4 { try log.append((0..<50).map { _ in NewEntry(kind: 2, payload: big) }) }
            try log.append((0..<5000).map { NewEntry(kind: 1, payload: payload($0)) })
            var cursor = try log.entries()
            var count = 0
            var largestChunk = 0
            var largestBytes = 0
            while try cursor.next() != nil {
                count += 1
                largestChunk = max(largestChunk, cursor.buffer.count)
                largestBytes = max(largestBytes, cursor.buffer.reduce(0) { $0 + $1.payload.count })
            }
            #expect(count == 5200)
            // The cursor holds one chunk at a time: bounded by entries and by bytes.
            #expect(largestChunk <= EntryCursor.chunkLimit)
            #expect(largestBytes <= EntryCursor.chunkBytes + big.count)
        }
    }
}
