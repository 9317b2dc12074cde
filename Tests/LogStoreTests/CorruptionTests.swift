import Foundation
import TemporaryDirectory
import Testing

@testable import LogStore

@Suite("Corrupt and unknown entries")
struct CorruptionTests {
    func makeLog(_ directory: URL, count: Int = 10) throws -> Log {
        let log = try Log.open(at: directory, options: .init(durability: .fast))
        try log.append((1...count).map { NewEntry(kind: 3, payload: Array("entry \($0)".utf8)) })
        return log
    }

    func expectError(_ code: LogStoreError.Code, at offset: LogOffset, _ body: () throws -> Void) {
        do {
            try body()
            Issue.record("expected \(code) at offset \(offset)")
        } catch let error as LogStoreError {
            #expect(error.code == code)
            #expect(error.offset == offset)
            #expect(error.description.contains("offset \(offset)"))
            #expect(error.description.contains(error.path ?? "?"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func aFlippedBitIsACorruptEntryNamingItsOffset() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeLog(directory)
            var bytes = try storedEntry(log, at: 4)
            bytes[18] ^= 0x01  // inside the payload
            try overwriteStoredEntry(log, at: 4, with: bytes)
            expectError(.corruptEntry, at: 4) { _ = try log.entry(at: 4) }
            #expect(try log.entry(at: 3)?.payload == Array("entry 3".utf8))
            // Iteration yields the entries before it, then the error.
            var seen: [LogOffset] = []
            expectError(.corruptEntry, at: 4) { try log.forEachEntry { seen.append($0.offset) } }
            #expect(seen == [1, 2, 3])
            #expect(try log.lastOffset == 10)
        }
    }

    @Test(arguments: [2, 200, 255])
    func anUnknownFormatVersionIsReported(_ version: UInt8) async throws {
        try withTemporaryDirectory { directory in
            let log = try makeLog(directory)
            var bytes = try storedEntry(log, at: 7)
            bytes[0] = version
            try overwriteStoredEntry(log, at: 7, with: bytes)
            expectError(.unknownFormatVersion, at: 7) { _ = try log.entry(at: 7) }
            do {
                _ = try log.entry(at: 7)
            } catch let error as LogStoreError {
                #expect(error.message.contains("format version \(version)"))
            }
        }
    }

    @Test func truncatedAndResizedEntriesAreCorrupt() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeLog(directory)
            try overwriteStoredEntry(log, at: 2, with: [1, 0, 0])
            expectError(.corruptEntry, at: 2) { _ = try log.entry(at: 2) }
            let bytes = try storedEntry(log, at: 5)
            try overwriteStoredEntry(log, at: 5, with: bytes + [0])
            expectError(.corruptEntry, at: 5) { _ = try log.entry(at: 5) }
        }
    }

    @Test func anEntryCopiedUnderAnotherOffsetFailsItsChecksum() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeLog(directory)
            try overwriteStoredEntry(log, at: 6, with: try storedEntry(log, at: 5))
            expectError(.corruptEntry, at: 6) { _ = try log.entry(at: 6) }
        }
    }

    @Test func aMissingOffsetIsReportedByIteration() async throws {
        try withTemporaryDirectory { directory in
            let log = try makeLog(directory)
            try log.environment.write { transaction in
                try transaction.removeValue(
                    forKey: withUnsafeBytes(of: LogOffset(8).key) { Array($0) }, in: log.entriesTable)
            }
            expectError(.corruptEntry, at: 8) { try log.forEachEntry { _ in } }
        }
    }

    @Test func crc32cMatchesTheStandardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        // Slicing-by-8 and the byte-wise tail agree at every split.
        let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let whole = CRC32C.checksum(bytes)
        for split in 0...bytes.count {
            let head = bytes[..<split].withUnsafeBytes { CRC32C.update(0, $0) }
            #expect(bytes[split...].withUnsafeBytes { CRC32C.update(head, $0) } == whole)
            let tableHead = bytes[..<split].withUnsafeBytes { CRC32C.updateWithTables(0, $0) }
            #expect(bytes[split...].withUnsafeBytes { CRC32C.updateWithTables(tableHead, $0) } == whole)
        }
    }

    @Test func theHardwareAndTheTablesAgree() {
        // Where the CPU has the instruction, both paths must give the same checksums, so a log
        // written on one machine verifies on another.
        var random = SeededRandom(seed: 32)
        for length in [0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 148, 1000, 4097] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let tables = bytes.withUnsafeBytes { CRC32C.updateWithTables(0, $0) }
            #expect(CRC32C.checksum(bytes) == tables, "length \(length), hardware: \(CRC32C.usesHardware)")
        }
        #expect(Array("123456789".utf8).withUnsafeBytes { CRC32C.updateWithTables(0, $0) } == 0xE306_9283)
    }

    @Test func theEnvelopeLayoutIsStable() {
        // Docs/LogFormat.md documents these bytes; a change here is a format change.
        let bytes = Envelope.encode(
            offset: 1, kind: 0x0102, time: EntryTime(microsecondsSince1970: 0x0A0B_0C0D), payload: [0xFF])
        #expect(bytes.count == 21)
        #expect(Array(bytes[0..<17]) == [1, 0, 0x01, 0x02, 0, 0, 0, 0, 0x0A, 0x0B, 0x0C, 0x0D, 0, 0, 0, 1, 0xFF])
    }
}
