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

/// Support bundles (Docs/Privacy.md): a user's device log exported for a developer, the user's
/// data redacted, readable by every reader of a device log.
@Suite struct SupportBundleScenarios {
    static let zone = RecordZone.ID(zoneName: "Zone-Quokka-7731")
    static let n1 = Record.ID(recordName: "rec-Zanzibar-4411", zoneID: zone)
    static let n2 = Record.ID(recordName: "rec-Kilimanjaro-5522", zoneID: zone)
    static let n3 = Record.ID(recordName: "rec-Okavango-6633", zoneID: zone)

    /// Every field value the phone ever writes, as a string.
    static let titles = ["Title-Marmalade-9931", "Title-Laptop-Walrus-1207", "Title-Phone-Pelican-8842"]
    static let others = [
        "Body-Saxophone-2261", "Secret-Obsidian-6604", "Bytes-Tangerine-3318", "Body-Harpsichord-7745",
    ]
    static let names = ["rec-Zanzibar-4411", "rec-Kilimanjaro-5522", "rec-Okavango-6633", "Zone-Quokka-7731"]

    /// The phone's story: a note with a body, an encrypted diagnosis, bytes and a photo, edited
    /// on the laptop and the phone at once (a conflict), over several syncs. Returns the phone,
    /// its photo's bytes and the photo's file name.
    static func phoneStory(_ directory: URL, _ server: SyncServer) async throws -> (TestDevice, [UInt8]) {
        let phone = try TestDevice("phone", server: server, directory: directory)
        let laptop = try TestDevice("laptop", server: server, directory: directory)
        // 09:00 the phone writes n1 and n2, with an encrypted field, bytes and a photo.
        try phone.createZone(zone)
        try phone.edit(n1, ["title": titles[0], "body": others[0]])
        try phone.encrypt(n1, "diagnosis", .string(others[1]))
        try phone.attach(n2, "blob", .bytes(Data(others[2].utf8)))
        let photoBytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let photo = directory.appendingPathComponent("photo-Flamingo-3390.jpg")
        try Data(photoBytes).write(to: photo)
        try phone.attach(n2, "photo", .asset(Asset(fileURL: photo)))
        try await phone.sync()
        // 09:05 the laptop syncs (the zone's key is not wrapped for it yet), the phone wraps it.
        _ = try? await laptop.sync()
        try await phone.sync()
        try await laptop.sync()
        // 09:10 both edit n1's title; the laptop sends first, the phone's save conflicts.
        try laptop.write(n1, titles[1])
        try phone.write(n1, titles[2])
        try await laptop.sync()
        await #expect(throws: SyncError.self, "the phone's save is refused: serverRecordChanged") {
            try await phone.sync()
        }
        try await phone.sync()  // the phone's delegate merged; its save goes through
        // 09:15 the phone writes n3 and deletes it.
        try phone.edit(n3, ["title": titles[0], "body": others[3]])
        try await phone.sync()
        try phone.delete(n3)
        try await phone.sync()
        return (phone, photoBytes)
    }

    /// The needles a scan looks for: each value as UTF-8 (strings and bytes are stored so in
    /// the log's Protocol Buffers messages) and base64 (the manifest is JSON).
    static func needles(_ text: String) -> [[UInt8]] {
        [Array(text.utf8), Array(Data(text.utf8).base64EncodedString().utf8)]
    }

    /// The files of the bundle (every one) that hold `text` in any of its encodings.
    static func found(_ text: String, in bundle: URL) throws -> [String] {
        try needles(text).flatMap { try files(under: bundle, containing: $0) }
    }

    @Test("a redacted bundle holds none of the values or names the phone wrote; keepInClear keeps titles only")
    func redactionScan() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (phone, photo) = try await Self.phoneStory(directory, server)
            // The device's own log holds them: the scan finds what is there.
            for text in Self.titles + Self.others + Self.names where text != Self.others[1] {
                #expect(try !files(under: phone.directory, containing: Array(text.utf8)).isEmpty, "\(text)")
            }
            let digest = AssetHasher.digest(of: photo)
            let user = try server.userRecordID(for: "alice").recordName  // in accountChanged, creators
            #expect(try !files(under: phone.directory, containing: Array(user.utf8)).isEmpty)

            let bundle = directory.appendingPathComponent("report.lsb")
            let summary = try phone.engine.exportSupportBundle(to: bundle)
            #expect(summary.manifest.redactValues && summary.manifest.hashNames)
            #expect(summary.entryCount == (try phone.engine.deviceLog.log.lastOffset.rawValue))
            for text in Self.titles + Self.others + Self.names + ["photo-Flamingo-3390", phone.directory.path, user] {
                #expect(try Self.found(text, in: bundle).isEmpty, "\(text) is in the bundle")
            }
            #expect(try files(under: bundle, containing: digest.bytes).isEmpty, "the photo's digest")
            #expect(try files(under: bundle, containing: Array(digest.hex.utf8)).isEmpty, "the photo's digest in hex")
            #expect(try files(under: bundle, containing: Array(photo[1000..<1064])).isEmpty, "the photo's bytes")

            let clear = directory.appendingPathComponent("titles.lsb")
            try phone.engine.exportSupportBundle(to: clear, options: .init(keepInClear: ["title"]))
            for text in Self.titles { #expect(try !Self.found(text, in: clear).isEmpty, "\(text)") }
            for text in Self.others + Self.names { #expect(try Self.found(text, in: clear).isEmpty, "\(text)") }
        }
    }

    @Test("the bundle reads as a device log: dump, timeline and blame show the original offsets and kinds")
    func readersOpenTheBundle() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (phone, _) = try await Self.phoneStory(directory, server)
            let bundle = directory.appendingPathComponent("report.lsb")
            try phone.engine.exportSupportBundle(to: bundle, options: .init(appVersion: "2.3 (118)"))
            let original = phone.engine.deviceLog.log
            let originalKinds = try Self.kinds(of: original)
            phone.releaseEngine()

            let manifest = try SupportBundle.manifest(at: bundle)
            #expect(manifest.appVersion == "2.3 (118)")
            #expect(manifest.baseOffset == 0 && manifest.firstOffset == 1)
            #expect(manifest.configuration["automaticallySync"] == "false")
            // It opens as a device log, with its index (released before the entries are opened alone).
            #expect(
                try DeviceReplay.openDeviceLog(at: bundle.path).snapshotState().offset == LogOffset(manifest.lastOffset)
            )
            let log = try DeviceReplay.openDeviceLogEntries(at: bundle.path)
            #expect(try Self.kinds(of: log).elementsEqual(originalKinds) { $0 == $1 })
            // Every entry describes, as `logtool dump` prints it.
            var cursor = try log.entries()
            while let entry = try cursor.next() {
                #expect(try EntryDecoder.device.describe(entry) != nil)
            }
            // The timeline draws the same steps at the same offsets, of the same kinds.
            let timeline = try Timeline.build(devices: [.init(name: "phone", log: log)], server: nil)
            let originalTimeline = try Timeline.build(devices: [.init(name: "phone", log: original)], server: nil)
            #expect(!timeline.steps.isEmpty)
            #expect(timeline.steps.map(\.offset) == originalTimeline.steps.map(\.offset))
            #expect(timeline.steps.map(\.kindName) == originalTimeline.steps.map(\.kindName))
            #expect(timeline.steps.map(\.marks) == originalTimeline.steps.map(\.marks))

            let hashed = Redactor(
                settings: .init(), key: [UInt8](try #require(Data(base64Encoded: manifest.key)))
            ).recordID(Self.n1)
            let blame = try RecordBlame.build(
                record: hashed.recordName, zone: hashed.zoneID.zoneName, device: .init(name: "phone", log: log))
            #expect(blame.events.contains { $0.kind == .conflict }, "\(blame.events.map(\.kind))")
            #expect(blame.events.contains { $0.kind == .saved })
        }
    }

    static func kinds(of log: Log) throws -> [(UInt64, EntryKind)] {
        var out: [(UInt64, EntryKind)] = []
        var cursor = try log.entries()
        while let entry = try cursor.next() { out.append((entry.offset.rawValue, entry.kind)) }
        return out
    }

    @Test("the same value hashes alike within a bundle and differently in another; names hash consistently")
    func hashesAreKeyedPerBundle() throws {
        let a = Redactor(settings: .init())
        let b = Redactor(settings: .init())
        #expect(a.key != b.key && a.keyID != b.keyID)
        let value = RecordValue.string("Title-Marmalade-9931")
        #expect(a.value(value, field: "title") == a.value(value, field: "body"))
        #expect(a.value(value, field: "title") != b.value(value, field: "title"))
        #expect(a.value(value, field: "title") != a.value(.string("Title-Marmalade-9932"), field: "title"))
        #expect(a.value(.int64(1), field: "n") != a.value(.string("1"), field: "n"), "the type is hashed too")
        #expect(a.recordID(Self.n1) == a.recordID(Self.n1))
        #expect(a.recordID(Self.n1).zoneID == a.zoneID(Self.zone))
        #expect(a.recordID(Self.n1) != b.recordID(Self.n1))
        #expect(a.zoneID(.default) == .default, "system names stay")
        #expect(a.name("_user12") != "_user12", "a user's record name is hashed")
        // The key in the manifest gives the same hashes (the server's extract will use it).
        #expect(Redactor(settings: .init(), key: a.key).value(value, field: "title") == a.value(value, field: "title"))
        guard case .string(let text) = a.value(value, field: "title") else {
            Issue.record("not a string")
            return
        }
        #expect(text.hasPrefix("‹redacted string, 20 bytes, h:"), "\(text)")
        #expect(a.value(.encrypted(.opened(value)), field: "title") == .string("‹encrypted, 48 bytes›"))
    }

    @Test("within a bundle, equal values written at different offsets carry equal hashes")
    func equalValuesEqualHashesInABundle() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (phone, _) = try await Self.phoneStory(directory, server)
            let bundle = directory.appendingPathComponent("report.lsb")
            try phone.engine.exportSupportBundle(to: bundle)
            phone.releaseEngine()
            let manifest = try SupportBundle.manifest(at: bundle)
            let redactor = Redactor(settings: .init(), key: [UInt8](try #require(Data(base64Encoded: manifest.key))))
            guard case .string(let hashed) = redactor.value(.string(Self.titles[0]), field: "title") else { return }
            // n1 and n3 were both titled titles[0]: the hash is in the bundle (more than once).
            #expect(try !files(under: bundle, containing: Array(hashed.utf8)).isEmpty)
        }
    }

    @Test("a range export keeps the range's entries and records its base offset")
    func rangeExport() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (phone, _) = try await Self.phoneStory(directory, server)
            let original = try Self.kinds(of: phone.engine.deviceLog.log)
            let bundle = directory.appendingPathComponent("range.lsb")
            let summary = try phone.engine.exportSupportBundle(
                to: bundle, options: .init(range: .offsets(from: 5, to: 12)))
            #expect(summary.entryCount == 8)
            #expect(
                summary.manifest.baseOffset == 4 && summary.manifest.firstOffset == 5
                    && summary.manifest.lastOffset == 12)
            let throughOnly = directory.appendingPathComponent("through.lsb")
            try phone.engine.exportSupportBundle(to: throughOnly, options: .init(range: .offsets(from: 1, to: 9)))
            #expect(throws: SupportBundleError.self) {
                try phone.engine.exportSupportBundle(
                    to: directory.appendingPathComponent("bad.lsb"), options: .init(range: .offsets(from: 9, to: 3)))
            }
            phone.releaseEngine()
            // Its entries are the device's 5...12, written from offset 1: readers that rebuild a
            // device's state refuse it, naming the range.
            let refusal = #expect(throws: DiagnosticsError.self) {
                try DeviceReplay.openDeviceLogEntries(at: bundle.path)
            }
            #expect(refusal?.code == .partialBundle && refusal?.message.contains("5...12") == true)
            let log = try LogEnvironment.open(at: bundle, options: .init(readOnly: true)).openLog(
                named: DeviceLog.logName)
            #expect(try Self.kinds(of: log).map { ($0.0 + 4, $0.1) }.elementsEqual(original[4..<12]) { $0 == $1 })
            let head = try DeviceReplay.openDeviceLogEntries(at: throughOnly.path)
            #expect(try Self.kinds(of: head).elementsEqual(original[0..<9]) { $0 == $1 })
        }
    }

    @Test("a corrupt entry in the device log stops the export with its offset; nothing is left behind")
    func corruptSourceEntry() throws {
        try withTemporaryDirectory { directory in
            let source = directory.appendingPathComponent("device")
            do {
                let deviceLog = try DeviceLog(directory: source, options: .init(durability: .fast))
                let id = Record.ID(recordName: "n1")
                for _ in 0..<5 {
                    try deviceLog.log.append(DeviceEntry.pendingRecordZoneChangesAdded([.saveRecord(id)]).newEntry)
                }
                try deviceLog.log.append(
                    NewEntry(kind: DeviceEntry.Kind.pendingRecordZoneChangesAdded, payload: [0xFF, 0xFF, 0xFF]))
                try deviceLog.log.append(DeviceEntry.untrackedChangesFlagged(true).newEntry)
            } catch let error as LogStoreError where error.code == .corruptEntry {
                // The log refuses to append a payload that does not decode: write it below the index.
                let log = try Log.open(at: source, named: DeviceLog.logName, options: .init(durability: .fast))
                try log.append(
                    NewEntry(kind: DeviceEntry.Kind.pendingRecordZoneChangesAdded, payload: [0xFF, 0xFF, 0xFF]))
                try log.append(DeviceEntry.untrackedChangesFlagged(true).newEntry)
            }
            let log = try Log.open(at: source, named: DeviceLog.logName, options: .init(durability: .fast))
            let bundle = directory.appendingPathComponent("report.lsb")
            let error = try #require(throws: SupportBundleError.self) {
                try SupportBundle.export(log, to: bundle, options: .init(), configuration: [:])
            }
            #expect(error.code == .corruptSource)
            #expect(error.offset == 6, "\(error)")
            #expect(!FileManager.default.fileExists(atPath: bundle.path))
        }
    }

    @Test(
        "a truncated bundle is refused naming the page, a tampered one naming the offset; a directory without a manifest is not a bundle"
    )
    func truncatedBundle() throws {
        try withTemporaryDirectory { directory in
            let source = directory.appendingPathComponent("device")
            do {
                let deviceLog = try DeviceLog(directory: source, options: .init(durability: .fast))
                for index in 0..<3000 {
                    let id = Record.ID(recordName: "n\(index)")
                    try deviceLog.log.append(DeviceEntry.pendingRecordZoneChangesAdded([.saveRecord(id)]).newEntry)
                }
                let bundle = directory.appendingPathComponent("report.lsb")
                try SupportBundle.export(deviceLog.log, to: bundle, options: .init(), configuration: [:])
            }
            let bundle = directory.appendingPathComponent("report.lsb")
            #expect(try SupportBundle.manifest(at: bundle).lastOffset == 3000)
            let data = bundle.appendingPathComponent("data.mdb")
            let bytes = try Data(contentsOf: data)
            try bytes.prefix(bytes.count * 2 / 3).write(to: data)
            let error = try #require(throws: SupportBundleError.self) { try SupportBundle.manifest(at: bundle) }
            #expect(error.code == .corrupt && error.page != nil, "\(error)")
            #expect(throws: LogStoreError.self) { try DeviceReplay.openDeviceLogEntries(at: bundle.path) }

            // A tampered manifest: one byte of its payload changed, its checksum fails.
            let tampered = directory.appendingPathComponent("tampered.lsb")
            do {
                let deviceLog = try DeviceLog(directory: source, options: .init(durability: .fast))
                try SupportBundle.export(deviceLog.log, to: tampered, options: .init(), configuration: [:])
            }
            let tamperedData = tampered.appendingPathComponent("data.mdb")
            var file = [UInt8](try Data(contentsOf: tamperedData))
            let needle = Array(SupportBundle.libraryVersion.utf8)
            let at = try #require(
                (0...(file.count - needle.count)).first { file[$0..<($0 + needle.count)].elementsEqual(needle) })
            file[at] ^= 0x20
            try Data(file).write(to: tamperedData)
            let damaged = try #require(throws: SupportBundleError.self) { try SupportBundle.manifest(at: tampered) }
            #expect(damaged.code == .corrupt && damaged.offset == 1, "\(damaged)")

            let notABundle = try #require(throws: SupportBundleError.self) { try SupportBundle.manifest(at: source) }
            #expect(notABundle.code == .notABundle)
        }
    }
}
