import Foundation
import LogStore
import LogSyncDiagnostics
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import TemporaryDirectory
import Testing

@testable import LogSync

/// The server's extract (Docs/Privacy.md, "The server's extract"): a user's server logs redacted
/// with their device bundle's key, read beside the bundle by timeline, blame and bisect.
@Suite struct ServerExtractScenarios {
    typealias Story = SupportBundleScenarios

    /// The phone's story, its bundle and the server's extract made with the bundle's key.
    static func bundleAndExtract(
        _ directory: URL, _ server: SyncServer
    ) async throws -> (bundle: URL, extract: URL, redactor: Redactor, photo: [UInt8]) {
        let (phone, photo) = try await Story.phoneStory(directory, server)
        let bundle = directory.appendingPathComponent("report.lsb")
        try phone.engine.exportSupportBundle(to: bundle)
        phone.releaseEngine()
        let extract = directory.appendingPathComponent("server.lsb")
        let (redactor, database) = try ServerExtract.redactor(forBundleAt: bundle)
        #expect(database == .private)
        try ServerExtract.export(server, user: "alice", redactor: redactor, to: extract)
        return (bundle, extract, redactor, photo)
    }

    /// Every record name and every field value of the records a log's entries hold.
    static func records(in log: Log, decode: (LogEntry) throws -> [Record]) throws -> [Record] {
        var out: [Record] = []
        var cursor = try log.entries()
        while let entry = try cursor.next() { out += try decode(entry) }
        return out
    }

    static func serverRecords(_ extract: URL, scope: String = "private") throws -> [Record] {
        let environment = try LogEnvironment.open(at: extract, options: .init(readOnly: true))
        return try records(in: environment.openLog(named: scope)) { entry in
            if case .recordSaved(let record) = try ServerEntry(entry) { return [record] }
            return []
        }
    }

    static func deviceRecords(_ bundle: URL) throws -> [Record] {
        try records(in: DeviceReplay.openDeviceLogEntries(at: bundle.path)) { entry in
            // The records as sent and as fetched (a batchSaved holds none of its own).
            guard entry.kind == DeviceEntry.Kind.batchPrepared || entry.kind == DeviceEntry.Kind.zoneChangesFetched
            else { return [] }
            switch try DeviceEntry(entry) {
            case .batchPrepared(let saves, _, _, _): return saves
            case .zoneChangesFetched(_, let modifications, _, _, _): return modifications
            default: return []
            }
        }
    }

    @Test("with the bundle's key, the extract names and hashes every record and value as the bundle does")
    func hashesMatchTheBundle() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (bundle, extract, redactor, _) = try await Self.bundleAndExtract(directory, server)
            let manifest = try ServerExtract.manifest(at: extract)
            #expect(manifest.kind == "serverExtract" && manifest.user == "alice")
            #expect(manifest.keyID == (try SupportBundle.manifest(at: bundle)).keyID)
            #expect(manifest.scopes["private"]?.firstOffset == 1 && manifest.scopes["private"]?.baseOffset == 0)

            let serverRecords = try Self.serverRecords(extract)
            let deviceRecords = try Self.deviceRecords(bundle)
            let n1 = redactor.recordID(Story.n1)
            #expect(n1.recordName.hasPrefix("h-"))
            // The same h-… names on both sides, and none in clear.
            let serverNames = Set(serverRecords.map(\.recordID))
            let deviceNames = Set(deviceRecords.map(\.recordID))
            #expect(serverNames.contains(n1) && deviceNames.contains(n1))
            #expect(serverNames == deviceNames, "\(serverNames) vs \(deviceNames)")
            // The same value hashes alike: n1's body as the phone sent it and as the server saved it.
            let body = redactor.value(.string(Story.others[0]), field: "body")
            #expect(serverRecords.contains { $0.recordID == n1 && $0["body"] == body })
            #expect(deviceRecords.contains { $0.recordID == n1 && $0["body"] == body })
            // Each version the server saved (by its change tag) has the fields the device fetched.
            let fetchedRecords = try Self.records(in: DeviceReplay.openDeviceLogEntries(at: bundle.path)) { entry in
                guard entry.kind == DeviceEntry.Kind.zoneChangesFetched else { return [] }
                if case .zoneChangesFetched(_, let modifications, _, _, _) = try DeviceEntry(entry) {
                    return modifications
                }
                return []
            }
            #expect(!fetchedRecords.isEmpty)
            for fetched in fetchedRecords where fetched.systemFields.recordChangeTag != nil {
                let saved = serverRecords.first {
                    $0.systemFields.recordChangeTag == fetched.systemFields.recordChangeTag
                }
                if let saved {
                    for key in ["title", "body"] where fetched[key] != nil {
                        #expect(saved[key] == fetched[key], "\(key)")
                    }
                }
            }
            // The extract opens as a server log, its index as the server keeps it.
            let log = try LogEnvironment.open(at: extract, options: .init(readOnly: true)).openLog(
                named: "private", projections: [ServerIndex()])
            #expect(log.projections.map(\.name) == ["index"])
            #expect(try log.lastOffset == (try server.admin.log(of: "alice").lastOffset))
        }
    }

    @Test("a scan of the extract's bytes finds none of the values, names, user or asset the devices wrote")
    func redactionScan() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let user = try server.userRecordID(for: "alice").recordName
            let serverDirectory = directory.appendingPathComponent("server")
            let (_, extract, redactor, photo) = try await Self.bundleAndExtract(directory, server)
            // The server's own files hold them: the scan finds what is there.
            for text in [Story.titles[1], Story.others[0], Story.names[0]] {
                #expect(try !files(under: serverDirectory, containing: Array(text.utf8)).isEmpty, "\(text)")
            }
            let digest = AssetHasher.digest(of: photo)
            for text in Story.titles + Story.others + Story.names + ["photo-Flamingo-3390", user] {
                #expect(try Story.found(text, in: extract).isEmpty, "\(text) is in the extract")
            }
            #expect(try files(under: extract, containing: digest.bytes).isEmpty, "the photo's digest")
            #expect(try files(under: extract, containing: Array(digest.hex.utf8)).isEmpty, "the photo's digest in hex")
            #expect(try files(under: extract, containing: Array(photo[1000..<1064])).isEmpty, "the photo's bytes")
            let key = Data(redactor.key).base64EncodedString()
            #expect(try files(under: extract, containing: Array(key.utf8)).isEmpty, "the key")
            #expect(try files(under: extract, containing: redactor.key).isEmpty, "the key's bytes")
        }
    }

    @Test("timeline, blame and bisect read the pair: the phone's batches link to the server's offsets by request")
    func readersOnThePair() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (bundle, extract, redactor, _) = try await Self.bundleAndExtract(directory, server)
            let device = try DeviceReplay.openDeviceLogEntries(at: bundle.path)
            let serverLog = try LogEnvironment.open(at: extract, options: .init(readOnly: true)).openLog(
                named: "private")
            let timeline = try Timeline.build(
                devices: [.init(name: "phone", log: device)], server: .init(name: "server", log: serverLog))
            let sent = timeline.steps.filter { $0.serverRelation == .sent }
            #expect(!sent.isEmpty, "\(timeline.text)")
            for step in sent {
                // The batch's request ID is the server's requestOutcome's, inside the linked offsets.
                let outcome = timeline.steps.first {
                    timeline.lanes[$0.lane].role == .server && $0.request == step.request
                        && step.serverOffsets?.contains($0.offset) == true
                }
                #expect(outcome != nil, "request \(step.request ?? "-")")
            }
            #expect(timeline.steps.contains { $0.serverRelation == .read })
            #expect(timeline.steps.contains { $0.marks.contains(.conflict) && timeline.lanes[$0.lane].role == .server })
            #expect(timeline.text.contains("(sent)") && timeline.text.contains("(answered)"))

            let n1 = redactor.recordID(Story.n1)
            let blame = try RecordBlame.build(
                record: n1.recordName, zone: n1.zoneID.zoneName, device: .init(name: "phone", log: device),
                server: .init(name: "server", log: serverLog))
            // The laptop's save won the conflict: the version held is its request's, which the
            // server's lane holds; the body the phone wrote first is named by the phone's batch.
            let origin = try #require(blame.origin, "\(blame.text)")
            let request = try #require(origin.request)
            #expect(
                timeline.steps.contains { timeline.lanes[$0.lane].role == .server && $0.request == request },
                "\(blame.text)\n\(timeline.text)")
            let body = try #require(origin.fields.first { $0.key == "body" })
            #expect(body.device == "phone", "\(blame.text)")
            #expect(
                timeline.steps.contains { $0.kindName == "batchPrepared" && $0.request == body.request },
                "\(blame.text)")
            #expect(blame.events.contains { $0.kind == .conflict })

            let bisect = try DeviceLogBisect(log: device).run(DeviceInvariant.named("tokens")!)
            #expect(bisect.firstBadOffset == nil, "\(bisect)")
        }
    }

    @Test("bad input: an unknown user, a range past the end, a wrong bundle: typed errors, nothing written")
    func badInput() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (bundle, extract, redactor, _) = try await Self.bundleAndExtract(directory, server)
            let out = directory.appendingPathComponent("out.lsb")
            let unknown = try #require(throws: ServerExtractError.self) {
                try ServerExtract.export(server, user: "mallory", redactor: redactor, to: out)
            }
            #expect(unknown.code == .unknownUser && unknown.message.contains("mallory"))
            #expect(try !server.isRegistered("mallory"), "the export registers nobody")
            let past = try #require(throws: ServerExtractError.self) {
                try ServerExtract.export(server, user: "alice", from: 100_000, redactor: redactor, to: out)
            }
            #expect(past.code == .invalidRange && past.message.contains("100000"), "\(past)")
            let exists = try #require(throws: ServerExtractError.self) {
                try ServerExtract.export(server, user: "alice", redactor: redactor, to: extract)
            }
            #expect(exists.code == .destinationExists)
            #expect(!FileManager.default.fileExists(atPath: out.path))

            // The extract is not a device bundle: no key to take.
            let notABundle = try #require(throws: ServerExtractError.self) {
                try ServerExtract.redactor(forBundleAt: extract)
            }
            #expect(notABundle.code == .badBundle, "\(notABundle)")
            // A bundle whose manifest's key does not match its key ID.
            let forged = directory.appendingPathComponent("forged.lsb")
            let manifest = try SupportBundle.manifest(at: bundle)
            var json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(manifest)) as! [String: Any]
            json["key"] = Data(repeating: 7, count: 32).base64EncodedString()
            do {  // closed before the bundle is read
                let log = try Log.open(at: forged, named: SupportBundle.manifestLogName)
                try log.append(
                    NewEntry(
                        kind: SupportBundle.manifestKind,
                        payload: Array(try JSONSerialization.data(withJSONObject: json))))
            }
            let mismatch = try #require(throws: ServerExtractError.self) {
                try ServerExtract.redactor(forBundleAt: forged)
            }
            #expect(mismatch.code == .badBundle && mismatch.description.contains("key"), "\(mismatch)")
            // A truncated bundle.
            let truncated = directory.appendingPathComponent("truncated.lsb")
            try FileManager.default.createDirectory(at: truncated, withIntermediateDirectories: true)
            let data = try Data(contentsOf: bundle.appendingPathComponent("data.mdb"))
            try data.prefix(data.count / 3).write(to: truncated.appendingPathComponent("data.mdb"))
            #expect(throws: ServerExtractError.self) { try ServerExtract.redactor(forBundleAt: truncated) }
            let damaged = try #require(throws: ServerExtractError.self) { try ServerExtract.manifest(at: truncated) }
            #expect(damaged.code == .corrupt || damaged.code == .notAnExtract, "\(damaged)")
        }
    }

    @Test("a range extract starts at offset 1 with its base offset; a key file hashes as the bundle's key does")
    func rangeAndKeyFile() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (_, extract, redactor, _) = try await Self.bundleAndExtract(directory, server)
            let whole = try Self.serverRecords(extract)
            let range = directory.appendingPathComponent("range.lsb")
            let summary = try ServerExtract.export(
                server, user: "alice", from: 5, through: 12, redactor: redactor, to: range)
            // The range is widened back to the start of the commit holding offset 5, and its
            // outcomes name their records by the extract's offsets.
            let scope = try #require(summary.manifest.scopes["private"])
            #expect(scope.firstOffset <= 5 && scope.lastOffset == 12 && scope.baseOffset == scope.firstOffset - 1)
            let base = scope.baseOffset
            let environment = try LogEnvironment.open(at: range, options: .init(readOnly: true))
            let log = try environment.openLog(named: "private", projections: [ServerIndex()])
            #expect(try log.lastOffset == LogOffset(12 - base))
            let original = try LogEnvironment.open(at: extract, options: .init(readOnly: true)).openLog(
                named: "private")
            var outcomes = 0
            for offset in 1...(12 - base) {
                let copied = try #require(try log.entry(at: LogOffset(offset)))
                let source = try #require(try original.entry(at: LogOffset(offset + base)))
                #expect(copied.kind == source.kind && copied.time == source.time)
                if case .requestOutcome(_, _, let outcome, _) = try ServerEntry(copied),
                    case .requestOutcome(_, _, let sourceOutcome, _) = try ServerEntry(source)
                {
                    outcomes += 1
                    #expect(
                        outcome.saved.map { $0.offset.rawValue + base } == sourceOutcome.saved.map(\.offset.rawValue))
                    for saved in outcome.saved {
                        let record = try #require(try log.entry(at: saved.offset))
                        guard case .recordSaved(let saved) = try ServerEntry(record) else {
                            Issue.record("offset \(saved.offset) is not a recordSaved")
                            continue
                        }
                        #expect(outcome.saved.contains { $0.recordID == saved.recordID })
                    }
                } else {
                    #expect(copied.payload == source.payload, "offset \(offset)")
                }
            }
            #expect(outcomes > 0)
            #expect(!whole.isEmpty)

            // A key file with the bundle's key gives the same extract's hashes.
            let keyFile = directory.appendingPathComponent("key.txt")
            try (Data(redactor.key).base64EncodedString() + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
            let fromFile = try ServerExtract.redactor(keyFile: keyFile, settings: .init())
            #expect(fromFile.keyID == redactor.keyID)
            #expect(fromFile.recordID(Story.n1) == redactor.recordID(Story.n1))
            try "not a key".write(to: keyFile, atomically: true, encoding: .utf8)
            let bad = try #require(throws: ServerExtractError.self) {
                try ServerExtract.redactor(keyFile: keyFile, settings: .init())
            }
            #expect(bad.code == .badKey)
        }
    }

    @Test("a server entry that does not decode stops the extract naming its log and offset; nothing is left behind")
    func corruptServerEntry() throws {
        try withTemporaryDirectory { directory in
            let raw = try Log.open(at: directory.appendingPathComponent("u1"), named: "private")
            let zone = RecordZone.ID(zoneName: "Zone-Quokka-7731")
            try raw.append(ServerEntry.zoneSaved(RecordZone(zoneID: zone)).newEntry)
            try raw.append(NewEntry(kind: ServerEntry.Kind.recordSaved, payload: [0xFF, 0xFF, 0xFF]))
            let out = directory.appendingPathComponent("out.lsb")
            let error = try #require(throws: ServerExtractError.self) {
                try ServerExtract.export(
                    [.init(scope: .private, name: "u1/private", log: RawServerLog(log: raw))], user: "alice",
                    redactor: Redactor(settings: .init()), to: out)
            }
            #expect(error.code == .corruptSource && error.offset == 2 && error.log == "u1/private", "\(error)")
            #expect(error.description.contains("offset 2") && error.description.contains("u1/private"))
            #expect(!FileManager.default.fileExists(atPath: out.path))
        }
    }
}

/// A server log read straight from a LogStore log without the server's index: what lets a test
/// hold an entry the index would refuse.
final class RawServerLog: ServerLog, @unchecked Sendable {
    let log: Log
    init(log: Log) { self.log = log }

    func read<R>(_ body: (any IndexReader) throws -> R) throws -> R {
        try body(Reader(log: log))
    }

    func write<R>(
        _ body: (any IndexReader) throws -> (entries: [NewEntry], result: R)
    ) throws -> (R, Range<LogOffset>) {
        let (entries, result) = try body(Reader(log: log))
        let first = try log.lastOffset.rawValue + 1
        try log.append(entries)
        return (result, LogOffset(first)..<LogOffset(first + UInt64(entries.count)))
    }

    var lastOffset: LogOffset { get throws { try log.lastOffset } }

    struct Reader: IndexReader {
        let log: Log
        func value(forKey key: [UInt8], in table: String) throws -> [UInt8]? { nil }
        func forEach(
            in table: String, from start: [UInt8]?,
            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
        ) throws {}
        func entry(at offset: LogOffset) throws -> LogEntry? { try log.entry(at: offset) }
        var lastOffset: LogOffset { get throws { try log.lastOffset } }
    }
}
