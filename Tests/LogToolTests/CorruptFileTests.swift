import Foundation
import LogStore
import LogSync
import LogSyncServer
import LogSyncTesting
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

/// Single-bit flips in a real device log's `data.mdb`: every bit of both meta pages (header
/// and `MDB_meta`), every bit of every page header, and a sample of the other bytes. On each
/// copy, in this process, the readers `logtool` runs (dump, stats, replay --verify, verify) and
/// an engine's open of its device log either succeed with the original's output or fail with a
/// typed error naming what was wrong. A crash would take the test runner with it.
@Suite("Bit flips in a device log's file")
struct CorruptFileTests {
    /// Where the flips go.
    enum Region: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// Every bit of the page header and `MDB_meta` of pages 0 and 1.
        case metaPages
        /// Every bit of the 16-byte header of every other page.
        case pageHeaders
        /// 200 bits elsewhere, chosen by a fixed seed.
        case otherBytes

        var testDescription: String { rawValue }
    }

    static let pageHeaderSize = 16
    static let metaSpan = 16 + 136

    /// A small real device log in `directory/original`: the phone's entries of the device story
    /// (`DeviceDumpCommandTests`), appended to a new device log in four transactions, which is
    /// closed before returning.
    static func writeDeviceLog(in directory: URL) async throws -> URL {
        let target = directory.appendingPathComponent("original", isDirectory: true)
        let (server, phone, _) = try await DeviceDumpCommandTests.writeDeviceStory(
            in: directory.appendingPathComponent("story"))
        defer { server.shutdown() }
        let source = phone.engine.deviceLog.log
        let end = try source.lastOffset
        let copy = try DeviceLog(directory: target, options: .init(durability: .fast, initialMapSize: 1 << 20))
        var entries: [NewEntry] = []
        try source.forEachEntry(through: end) { entry in
            entries.append(NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time))
        }
        // In four transactions, so that both meta pages hold snapshots with entries and some
        // pages were freed.
        let step = (entries.count + 3) / 4
        for start in stride(from: 0, to: entries.count, by: step) {
            try copy.log.append(Array(entries[start..<min(start + step, entries.count)]))
        }
        return target
    }

    /// What one reader gave: its output (with the copy's path replaced by `LOG`) or its error.
    struct Outcome {
        var tool: String
        var result: Result<String, any Error>
    }

    /// Runs the readers on the log in `directory`, as `logtool` and an engine would.
    static func readers(_ directory: URL) -> [Outcome] {
        var outcomes: [Outcome] = []
        func run(_ tool: String, _ body: () throws -> String) {
            do {
                let text = try body().replacingOccurrences(of: directory.path, with: "LOG")
                outcomes.append(Outcome(tool: tool, result: .success(text)))
            } catch {
                outcomes.append(Outcome(tool: tool, result: .failure(error)))
            }
        }
        func openLog() throws -> Log {
            // As `logtool dump` and `stats` open a log (Tools/logtool/Options.swift).
            let environment = try LogEnvironment.open(at: directory, options: .init(readOnly: true))
            let name = try LogSelection.choose(
                requested: nil, available: try environment.logNames(), path: environment.path)
            return try environment.openLog(named: name)
        }
        run("dump") {
            let log = try openLog()
            var text = ""
            try EntryDumper(formatter: EntryFormatter(decoder: .forLog(named: log.name))).dump(log, to: &text)
            return text
        }
        run("stats") {
            let log = try openLog()
            return try LogStats.collect(log, decoder: .forLog(named: log.name)).text
        }
        run("replay --verify") {
            let result = try DeviceReplay.run(path: directory.path, through: nil, verify: true)
            // As `logtool replay --verify` does (Tools/logtool/Replay.swift).
            if case .differs(let mismatch)? = result.verification {
                throw LogToolError("projections not verified: \(mismatch)")
            }
            return result.text
        }
        run("verify") { try LogVerification.run(path: directory.path).text }
        run("engine open") {
            // What `SyncEngine.init` opens, and the state it reads first.
            let deviceLog = try DeviceLog(
                directory: directory, options: .init(durability: .fast, initialMapSize: 1 << 20))
            let state = try deviceLog.snapshotState()
            return DeviceStateReport.text(state)
        }
        return outcomes
    }

    /// Whether `error` is typed and names what was wrong: a page, an entry's offset, or (for
    /// the diagnostics' own errors) a message.
    static func namesWhatWasWrong(_ error: any Error) -> Bool {
        switch error {
        case let error as LogStoreError:
            switch error.code {
            case .corruptFile: return error.page != nil || error.offset != nil || error.table != nil
            case .corruptEntry, .unknownFormatVersion: return error.offset != nil
            case .notALog, .projectionInconsistent: return !error.message.isEmpty
            default: return false  // an LMDB error, I/O or anything else names nothing in the file
            }
        case let error as DiagnosticsError:
            return !error.description.isEmpty
        case let error as LogToolError:
            return error.message.hasPrefix("projections not verified: projection ")
        default:
            return false
        }
    }

    /// The (byte, bit) positions of `region` in a file of `size` bytes with pages of `pageSize`.
    static func positions(_ region: Region, size: Int, pageSize: Int) -> [(byte: Int, bit: Int)] {
        let bits = { (range: Range<Int>) in range.flatMap { byte in (0..<8).map { (byte, $0) } } }
        switch region {
        case .metaPages:
            return bits(0..<metaSpan) + bits(pageSize..<pageSize + metaSpan)
        case .pageHeaders:
            return (2..<size / pageSize).flatMap { page in bits(page * pageSize..<page * pageSize + pageHeaderSize) }
        case .otherBytes:
            var state: UInt64 = 0x15_0000_0001
            var chosen: [(Int, Int)] = []
            while chosen.count < 200 {
                // SplitMix64.
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                let byte = Int(z % UInt64(size))
                let inPage = byte % pageSize
                let page = byte / pageSize
                if page < 2 ? inPage < metaSpan : inPage < pageHeaderSize { continue }
                chosen.append((byte, Int((z >> 40) % 8)))
            }
            return chosen
        }
    }

    // The regions one after another, each giving way between copies: thousands of synchronous
    // reads must not hold the cooperative pool from the suites running alongside (HTTP servers
    // answer on it).
    @Test(.serialized, arguments: Region.allCases)
    func everyReaderSurvivesEveryFlip(_ region: Region) async throws {
        try await withTemporaryDirectory { directory in
            let original = try await Self.writeDeviceLog(in: directory)
            let pristine = try [UInt8](Data(contentsOf: original.appendingPathComponent("data.mdb")))
            let pageSize = Int(pristine.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 16 + 24, as: UInt32.self) })
            let olderMeta =
                pristine.withUnsafeBytes {
                    $0.loadUnaligned(fromByteOffset: 16 + 128, as: UInt64.self)
                        < $0.loadUnaligned(fromByteOffset: pageSize + 16 + 128, as: UInt64.self)
                } ? 0 : 1
            let olderTransactionID = (olderMeta * pageSize + 16 + 128)..<(olderMeta * pageSize + 16 + 136)

            // The readers on an undamaged copy: all succeed; their outputs are what a copy that
            // reads without an error must show.
            // One directory for every copy: each reader closes the environment before the next
            // copy is written over the last (an environment left open would fail the engine's
            // read-write open with .alreadyOpen).
            let url = directory.appendingPathComponent("copy", isDirectory: true)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            func copy(_ bytes: [UInt8], _ number: Int) throws -> URL {
                try Data(bytes).write(to: url.appendingPathComponent("data.mdb"))
                return url
            }
            let baselineURL = try copy(pristine, 0)
            let baseline = Self.readers(baselineURL)
            for outcome in baseline {
                if case .failure(let error) = outcome.result {
                    Issue.record("\(outcome.tool) fails on the undamaged log: \(error)")
                }
            }
            let expected = baseline.map { try? $0.result.get() }

            var failures: [String: Int] = [:]
            let positions = Self.positions(region, size: pristine.count, pageSize: pageSize)
            for (number, position) in positions.enumerated() {
                await Task.yield()
                var bytes = pristine
                bytes[position.byte] ^= UInt8(1 << position.bit)
                _ = try copy(bytes, number + 1)
                let outcomes = Self.readers(url)
                let flip = "bit \(position.bit) of byte \(position.byte) (page \(position.byte / pageSize))"
                var failed = false
                for outcome in outcomes {
                    guard case .failure(let error) = outcome.result else {
                        if olderTransactionID.contains(position.byte) {
                            Issue.record(
                                "\(flip), the older meta page's transaction ID: \(outcome.tool) read on without an error"
                            )
                        }
                        continue
                    }
                    failed = true
                    #expect(
                        Self.namesWhatWasWrong(error),
                        "\(flip): \(outcome.tool) failed with \(type(of: error)) \(error)")
                    failures["\((error as? LogStoreError)?.code.rawValue ?? "\(type(of: error))")", default: 0] += 1
                }
                for (outcome, want) in zip(outcomes, expected) {
                    // Entries are checksummed: a dump or stats that reads shows the original. When no
                    // reader found anything, no reader may show anything else (no silent skip).
                    guard let got = try? outcome.result.get(), !failed || ["dump", "stats"].contains(outcome.tool)
                    else { continue }
                    #expect(got == want, "\(flip): \(outcome.tool) reads without an error but shows something else")
                }
            }
            if region == .metaPages { #expect(failures["corruptFile", default: 0] > 0) }
        }
    }

    /// A flipped byte in the name of the device log's table (`log.device` → `log.dewice`) leaves
    /// every page sound: LMDB would find no log named `device`, and a read-write open would create
    /// an empty one in the damaged file. Every reader refuses the file instead, naming the
    /// tables, and the engine's open writes nothing into it (Docs/LogFormat.md, "The table
    /// catalogue").
    @Test(
        "a damaged table name (log.device → log.dewice): every reader and the engine refuse it, naming it, and nothing is written"
    )
    func damagedTableName() async throws {
        try await withTemporaryDirectory { directory in
            let original = try await Self.writeDeviceLog(in: directory)
            let file = original.appendingPathComponent("data.mdb")
            var bytes = [UInt8](try Data(contentsOf: file))
            let name = Array("log.device".utf8)
            var renamed = 0
            // The table's name as a key of LMDB's main database (the catalogue's copy ends in a newline).
            for start in 0...(bytes.count - name.count - 1)
            where bytes[start..<start + name.count].elementsEqual(name)
                && bytes[start + name.count] != UInt8(ascii: "\n")
            {
                bytes[start + 6] = UInt8(ascii: "w")
                renamed += 1
            }
            #expect(renamed > 0)
            try Data(bytes).write(to: file)
            let outcomes = Self.readers(original)
            #expect(outcomes.map(\.tool) == ["dump", "stats", "replay --verify", "verify", "engine open"])
            for outcome in outcomes {
                guard case .failure(let error) = outcome.result else {
                    Issue.record("\(outcome.tool) read the damaged file without an error")
                    continue
                }
                #expect(Self.namesWhatWasWrong(error), "\(outcome.tool): \(error)")
                let text = "\(error)"
                #expect(text.contains("log.dewice") && text.contains("log.device"), "\(outcome.tool): \(text)")
            }
            #expect([UInt8](try Data(contentsOf: file)) == bytes, "a reader or the engine wrote into the damaged file")
        }
    }
}
