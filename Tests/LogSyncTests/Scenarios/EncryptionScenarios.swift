import Foundation
import LogStore
import LogSyncServer
import LogSyncTesting
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync

/// A database that passes everything to the server, key directory included, and may change one
/// byte of the sealed values of the records a fetch returns: someone with the server's disks
/// edits the ciphertext.
final class TamperingDatabase: ForwardingDatabase, ZoneKeyDirectory {
    let base: InProcessDatabase
    private let tampered = Mutex<Set<String>>([])

    init(_ base: InProcessDatabase) { self.base = base }

    /// Fetches return the sealed values of these records with a byte flipped.
    func tamper(with recordNames: Set<String>) { tampered.withLock { $0 = recordNames } }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        var response = try await base.fetchZoneChanges(request)
        let names = tampered.withLock { $0 }
        response.modifications = response.modifications.map { modification in
            guard names.contains(modification.record.recordID.recordName) else { return modification }
            var record = modification.record
            for key in record.allKeys() {
                guard case .encrypted(.sealed(var sealed))? = record[key] else { continue }
                sealed.box[sealed.box.count - 1] ^= 0x40
                record.setValueKeepingChangeState(.encrypted(.sealed(sealed)), forKey: key)
            }
            return .init(record: record)
        }
        return response
    }

    func registerDeviceKey(_ key: DevicePublicKey) async throws { try await base.registerDeviceKey(key) }
    func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        try await base.fetchZoneKeys(request)
    }
    func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await base.saveZoneKeys(request)
    }
}

/// A key directory that passes everything to the server, and adds to each zone's keys a version
/// 4294967295 wrapped for this device and for a device that is not one of the zone's: a server
/// that kept a version no rotation can follow, and a recipient gone, so the engine wants to rotate.
final class ExhaustedVersionDirectory: ForwardingDatabase, ZoneKeyDirectory {
    let base: InProcessDatabase
    private let device = Mutex<DevicePublicKey?>(nil)

    init(_ base: InProcessDatabase) { self.base = base }

    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try await base.modifyRecords(request)
    }

    func registerDeviceKey(_ key: DevicePublicKey) async throws {
        device.withLock { $0 = key }
        try await base.registerDeviceKey(key)
    }

    func fetchZoneKeys(_ request: FetchZoneKeysRequest) async throws -> FetchZoneKeysResponse {
        var response = try await base.fetchZoneKeys(request)
        guard let mine = device.withLock({ $0 }) else { return response }
        for zoneID in request.zoneIDs ?? [] {
            var keys = (try? response.results[zoneID]?.get()) ?? ZoneKeys()
            let last = ZoneKey.generate(zoneID: zoneID, version: .max)
            keys.wrappedKeys += [last.wrapped(for: mine), last.wrapped(for: DeviceKeyPair().publicKey)]
            response.results[zoneID] = .success(keys)
        }
        return response
    }

    func saveZoneKeys(_ request: SaveZoneKeysRequest) async throws -> SaveZoneKeysResponse {
        try await base.saveZoneKeys(request)
    }
}

/// The paths of the regular files under `directory` whose bytes contain `needle`.
func files(under directory: URL, containing needle: [UInt8]) throws -> [String] {
    var found: [String] = []
    let enumerator = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: [.isRegularFileKey])
    while let url = enumerator?.nextObject() as? URL {
        guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
        let bytes = [UInt8](try Data(contentsOf: url))
        if bytes.count >= needle.count,
            (0...(bytes.count - needle.count)).contains(where: { bytes[$0..<($0 + needle.count)].elementsEqual(needle) }
            )
        {
            found.append(url.path)
        }
    }
    return found
}

/// End-to-end encrypted fields as device timelines (F129, Docs/Encryption.md): a phone keeps a
/// diagnosis in a note's encrypted field; the server holds only ciphertext; the user's laptop and
/// a share participant read the plaintext once a device holding the zone's key has wrapped it
/// for them.
@Suite("Scenario: encrypted fields")
struct EncryptionScenarios: NoteIDs {
    static let secret = "diagnosis: PLAINTEXT-SENTINEL-7f3a"

    static func zoneError(_ device: TestDevice, _ zoneID: RecordZone.ID) -> SyncError? {
        device.events.compactMap { event -> SyncError? in
            if case .didFetchRecordZoneChanges(let done) = event, done.zoneID == zoneID { done.error } else { nil }
        }.last
    }

    @Test(
        "F129 the phone's encrypted field reaches the server as ciphertext only; the laptop reads it once the phone has wrapped the key for it"
    )
    func secondDeviceOfTheSameUser() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let serverDirectory = directory.appendingPathComponent("server")  // where the server stores everything
            let phone = try TestDevice("phone", server: server, directory: directory)
            let n1 = Self.note("n1")

            // 09:00 the phone writes a note with a title and an encrypted diagnosis.
            try phone.createZone(Self.notes)
            try phone.write(n1, "Check-up")
            try phone.encrypt(n1, "diagnosis", .string(Self.secret))
            try phone.encrypt(n1, "visits", .list([.int64(3), .int64(7)]))
            try await phone.sync()
            #expect(phone.unacknowledgedEdits.isEmpty)
            #expect(phone.decrypted(n1, "diagnosis") == .string(Self.secret))

            // The server's record holds the field sealed; no file of the server holds the plaintext.
            let stored = try #require(
                try await server.database(for: "alice", device: "admin").fetchZoneChanges(
                    zoneID: Self.notes, since: nil
                )
                .modifications.first { $0.record.recordID == n1 }?.record)
            guard case .encrypted(.sealed(let sealed))? = stored["diagnosis"] else {
                Issue.record("the server's diagnosis is \(String(describing: stored["diagnosis"]))")
                return
            }
            #expect(sealed.keyVersion == 1)
            #expect(stored["title"] == .string("Check-up"))
            #expect(try files(under: serverDirectory, containing: Array(Self.secret.utf8)).isEmpty)
            #expect(try !files(under: serverDirectory, containing: Array("Check-up".utf8)).isEmpty)
            // The phone's own device log holds the plaintext: the device is where it is read.
            #expect(try !files(under: phone.directory, containing: Array(Self.secret.utf8)).isEmpty)

            // 10:00 the laptop's first sync: the zone's key is not wrapped for it yet. The zone's
            // fetch fails with zoneKeyUnavailable, and its token stays where it was.
            let laptop = try TestDevice("laptop", server: server, directory: directory)
            await #expect(throws: SyncError.self) { try await laptop.sync() }
            let unavailable = try #require(Self.zoneError(laptop, Self.notes))
            #expect(unavailable.code == .zoneKeyUnavailable)
            #expect(
                unavailable.item == .record(n1) && unavailable.message.contains("\"diagnosis\""),
                "\(unavailable.message)")
            #expect(laptop.title(n1) == nil)

            // 10:05 the phone syncs: it wraps the zone's key for the laptop, which registered.
            try await phone.sync()
            laptop.clearEvents()
            try await laptop.sync()
            #expect(Self.zoneError(laptop, Self.notes) == nil)
            #expect(laptop.title(n1) == "Check-up")
            #expect(laptop.decrypted(n1, "diagnosis") == .string(Self.secret))
            #expect(laptop.decrypted(n1, "visits") == .list([.int64(3), .int64(7)]))

            // 10:10 the laptop edits the diagnosis; the phone reads the edit.
            try laptop.encrypt(n1, "diagnosis", .string("all clear"))
            try await laptop.sync()
            try await phone.sync()
            #expect(phone.decrypted(n1, "diagnosis") == .string("all clear"))

            // After a relaunch the laptop fetches its wrapped key again and still opens new notes.
            try laptop.startEngine()
            try phone.encrypt(Self.note("n2"), "diagnosis", .string("second"))
            try await phone.sync()
            try await laptop.sync()
            #expect(laptop.decrypted(Self.note("n2"), "diagnosis") == .string("second"))
            #expect(try files(under: serverDirectory, containing: Array("all clear".utf8)).isEmpty)
        }
    }

    @Test(
        "F129 a share participant reads the owner's encrypted field once the owner's device has wrapped the key for them"
    )
    func shareParticipant() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let serverDirectory = directory.appendingPathComponent("server")  // where the server stores everything
            let (alice, notes) = try await SharedEngineTests.aliceSharesNotesWithBob(server, directory)
            let mine = Self.note("n1", notes)
            try alice.encrypt(mine, "diagnosis", .string(Self.secret))
            try await alice.sync()

            let bob = try TestDevice("bob-phone", server: server, user: "bob", scope: .shared, directory: directory)
            await #expect(throws: SyncError.self) { try await bob.sync() }
            let shared = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            let n1 = Record.ID(recordName: "n1", zoneID: shared)
            #expect(Self.zoneError(bob, shared)?.code == .zoneKeyUnavailable)

            // Alice's phone syncs: bob's device is now one of the zone's recipients.
            try await alice.sync()
            bob.clearEvents()
            try await bob.sync()
            #expect(Self.zoneError(bob, shared) == nil)
            #expect(bob.decrypted(n1, "diagnosis") == .string(Self.secret))

            // Bob (read-write) edits it; alice reads the edit; the server never sees either.
            try bob.encrypt(n1, "diagnosis", .string("bob's edit PLAINTEXT-SENTINEL-2"))
            try await bob.sync()
            try await alice.sync()
            #expect(alice.decrypted(mine, "diagnosis") == .string("bob's edit PLAINTEXT-SENTINEL-2"))
            #expect(try files(under: serverDirectory, containing: Array("PLAINTEXT-SENTINEL".utf8)).isEmpty)
        }
    }

    @Test(
        "F129 removing a participant rotates the zone's key: new values are sealed under a version never wrapped for them"
    )
    func rotationWhenAParticipantIsRemoved() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let (alice, notes) = try await SharedEngineTests.aliceSharesNotesWithBob(server, directory)
            try alice.encrypt(Self.note("n1", notes), "diagnosis", .string("before"))
            try await alice.sync()
            let bob = try TestDevice("bob-phone", server: server, user: "bob", scope: .shared, directory: directory)
            try? await bob.sync()
            try await alice.sync()
            try await bob.sync()
            let shared = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            #expect(bob.decrypted(Record.ID(recordName: "n1", zoneID: shared), "diagnosis") == .string("before"))

            // Alice removes bob from the share.
            let owner = server.database(for: "alice", device: "admin")
            let current = try await owner.fetchZoneChanges(zoneID: notes, since: nil).modifications
                .map(\.record).first { $0.recordType == Share.recordType }
            var kept = try Share(record: try #require(current))
            kept.removeParticipant(UserIdentity(emailAddress: "bob@example.com"))
            _ = try await owner.modifyRecords(saving: [kept.record], deleting: []).saveResults[kept.recordID]?.get()

            // Her phone's next sync rotates the key; her next note is sealed under version 2,
            // wrapped for her own device only.
            try await alice.sync()
            try alice.encrypt(Self.note("n2", notes), "diagnosis", .string("after"))
            try await alice.sync()
            let keys = try #require(
                try await owner.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [notes])).results[notes]?.get())
            #expect(keys.latestVersion == 2)
            let aliceDevices = Set(keys.recipients.map(\.keyID))
            #expect(Set(keys.wrappedKeys.filter { $0.version == 2 }.map(\.recipientKeyID)) == aliceDevices)
            #expect(
                Set(keys.wrappedKeys.filter { $0.version == 1 }.map(\.recipientKeyID)).count == aliceDevices.count + 1)
            let stored = try #require(
                try await owner.fetchZoneChanges(zoneID: notes, since: nil).modifications
                    .first { $0.record.recordID == Self.note("n2", notes) }?.record)
            guard case .encrypted(.sealed(let sealed))? = stored["diagnosis"] else {
                Issue.record("n2's diagnosis is \(String(describing: stored["diagnosis"]))")
                return
            }
            #expect(sealed.keyVersion == 2)
            // The old note still opens on alice's device with version 1.
            #expect(alice.decrypted(Self.note("n1", notes), "diagnosis") == .string("before"))
        }
    }

    @Test(
        "F129 a key version of 4294967295 from the server leaves no next version: the engine does not rotate, and does not trap"
    )
    func exhaustedKeyVersion() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let hostile = ExhaustedVersionDirectory(server.database(for: "alice", device: "phone"))
            let phone = try TestDevice("phone", database: hostile, directory: directory.appendingPathComponent("phone"))
            try phone.createZone(Self.notes)
            try await phone.sync()  // registers the device key
            try phone.encrypt(Self.note("n1"), "diagnosis", .string("one"))
            try await phone.sync()
            // The note went out sealed under the version the server reported; no rotation was tried.
            let owner = server.database(for: "alice", device: "admin")
            let stored = try #require(
                try await owner.fetchZoneChanges(zoneID: Self.notes, since: nil).modifications
                    .first { $0.record.recordID == Self.note("n1") }?.record)
            guard case .encrypted(.sealed(let sealed))? = stored["diagnosis"] else {
                Issue.record("n1's diagnosis is \(String(describing: stored["diagnosis"]))")
                return
            }
            #expect(sealed.keyVersion == .max)
            let kept = try #require(
                try await owner.fetchZoneKeys(FetchZoneKeysRequest(zoneIDs: [Self.notes])).results[Self.notes]?.get())
            #expect(kept.latestVersion == 0)  // the server kept no wrap past the highest valid version
        }
    }

    @Test(
        "F129 changed ciphertext is a decryptionFailed naming the record and field; the zone's other notes still arrive"
    )
    func tamperedCiphertext() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try phone.encrypt(Self.note("n1"), "diagnosis", .string("one"))
            try phone.encrypt(Self.note("n2"), "diagnosis", .string("two"))
            try await phone.sync()

            let tampering = TamperingDatabase(server.database(for: "alice", device: "laptop"))
            tampering.tamper(with: ["n1"])
            let laptop = try TestDevice(
                "laptop", database: tampering, directory: directory.appendingPathComponent("laptop"))
            await #expect(throws: SyncError.self) { try await laptop.sync() }  // registers its key
            try await phone.sync()  // wraps the zone key for it
            laptop.clearEvents()
            await #expect(throws: SyncError.self) { try await laptop.sync() }
            let error = try #require(Self.zoneError(laptop, Self.notes))
            #expect(error.code == .decryptionFailed)
            #expect(error.item == .record(Self.note("n1")))
            #expect(
                error.message.contains("\"diagnosis\"") && error.message.contains("authentication failed"),
                "\(error.message)")
            #expect(laptop.decrypted(Self.note("n1"), "diagnosis") == nil)
            #expect(laptop.decrypted(Self.note("n2"), "diagnosis") == .string("two"))
        }
    }

    @Test("F129 an encrypted reference fails its save alone, naming the record and field; nothing of it is sent")
    func encryptedReferenceRefused() async throws {
        try await withServer(shutsDown: true) { directory, server in
            let phone = try TestDevice("phone", server: server, directory: directory)
            try phone.createZone(Self.notes)
            try phone.write(Self.note("n1"), "Fine")
            try phone.encrypt(Self.note("n2"), "link", .reference(Record.Reference(recordID: Self.note("n1"))))
            try? await phone.sync()
            let failures = phone.events.flatMap { event -> [SyncEngine.Event.SentRecordZoneChanges.FailedRecordSave] in
                if case .sentRecordZoneChanges(let sent) = event { sent.failedRecordSaves } else { [] }
            }
            let failure = try #require(failures.first { $0.record.recordID == Self.note("n2") })
            #expect(failure.error.code == .invalidArguments)
            #expect(failure.error.item == .record(Self.note("n2")))
            #expect(
                failure.error.message.contains("\"link\"") && failure.error.message.contains("cannot hold a reference"),
                "\(failure.error.message)")
            let stored = try await server.database(for: "alice", device: "admin").fetchZoneChanges(
                zoneID: Self.notes, since: nil)
            #expect(stored.modifications.map(\.record.recordID.recordName) == ["n1"])
        }
    }
}
