import Foundation
import Testing

@testable import SyncModel

/// Sealing and opening encrypted fields, and wrapping zone keys for devices (F129,
/// Docs/Encryption.md). Every failure is a typed `decryptionFailed` naming what did not open,
/// never a garbage value.
@Suite("F129 encrypted fields: sealing, opening and key wrapping")
struct EncryptionTests {
    static let key = ZoneKey.generate(zoneID: Fixture.notes, version: 1)

    static let plaintexts: [RecordValue] = [
        .string("the diagnosis"), .string(""), .int64(.min), .double(-0.5), .bool(true), .bytes(Data([0, 1, 2])),
        .date(Fixture.t0), .location(Location(latitude: 48.85, longitude: 2.29, altitude: 35)),
        .list([.string("a"), .string("b")]), .list([]),
    ]

    @Test("F129 every encryptable value seals and opens to itself", arguments: plaintexts.indices)
    func roundTrip(index: Int) throws {
        let value = Self.plaintexts[index]
        let sealed = Self.key.seal(value, recordID: Fixture.n1, key: "secret")
        #expect(sealed.keyVersion == 1)
        #expect(try Self.key.open(sealed, recordID: Fixture.n1, key: "secret") == value)
        // Two seals of one value differ (a fresh nonce each time).
        #expect(Self.key.seal(value, recordID: Fixture.n1, key: "secret").box != sealed.box)
    }

    @Test("F129 a changed byte, another field, record or key: decryptionFailed naming the record and field")
    func tamperedOrMovedValuesDoNotOpen() throws {
        let sealed = Self.key.seal(.string("the diagnosis"), recordID: Fixture.n1, key: "secret")
        var flipped = sealed
        flipped.box[flipped.box.count / 2] ^= 0x01
        let cases: [(SealedValue, Record.ID, String, ZoneKey, String)] = [
            (flipped, Fixture.n1, "secret", Self.key, "authentication failed"),
            (sealed, Fixture.n1, "other", Self.key, "authentication failed"),
            (sealed, Fixture.n2, "secret", Self.key, "authentication failed"),
            (
                sealed, Fixture.n1, "secret", ZoneKey.generate(zoneID: Fixture.notes, version: 1),
                "authentication failed"
            ),
            (sealed, Fixture.n1, "secret", ZoneKey.generate(zoneID: Fixture.notes, version: 2), "key version 1, not 2"),
            (
                SealedValue(keyVersion: 1, box: Data([1, 2, 3])), Fixture.n1, "secret", Self.key,
                "authentication failed"
            ),
        ]
        for (value, recordID, field, key, reason) in cases {
            let error = try #require(throws: SyncError.self) { try key.open(value, recordID: recordID, key: field) }
            #expect(error.code == .decryptionFailed)
            #expect(error.item == .record(recordID))
            #expect(error.message.contains("\"\(field)\"") && error.message.contains(reason), "\(error.message)")
        }
    }

    @Test("F129 a zone key wrapped for a device opens with that device's key only")
    func wrapping() throws {
        let phone = DeviceKeyPair()
        let laptop = DeviceKeyPair()
        let wrap = Self.key.wrapped(for: laptop.publicKey)
        try wrap.validate()
        #expect(wrap.recipientKeyID == laptop.publicKey.keyID && wrap.wrapped.count == WrappedZoneKey.wrappedSize)
        let opened = try laptop.unwrap(wrap)
        #expect(opened == Self.key)
        let sealed = Self.key.seal(.string("x"), recordID: Fixture.n1, key: "k")
        #expect(try opened.open(sealed, recordID: Fixture.n1, key: "k") == .string("x"))

        // A wrap for another device.
        let other = try #require(throws: SyncError.self) { try phone.unwrap(wrap) }
        #expect(other.code == .decryptionFailed && other.item == .zone(Fixture.notes))
        #expect(other.message.contains("wrapped for device key \(laptop.publicKey.keyID)"), "\(other.message)")
        // A wrap for another device relabelled as the phone's: its bytes do not open.
        var relabelled = wrap
        relabelled.recipientKeyID = phone.publicKey.keyID
        let forged = try #require(throws: SyncError.self) { try phone.unwrap(relabelled) }
        #expect(
            forged.code == .decryptionFailed && forged.message.contains("authentication failed"), "\(forged.message)")
        // A wrap moved to another zone or version does not open either.
        for moved in [
            WrappedZoneKey(
                zoneID: Fixture.photos, version: 1, recipientKeyID: wrap.recipientKeyID, check: wrap.check,
                wrapped: wrap.wrapped),
            WrappedZoneKey(
                zoneID: Fixture.notes, version: 2, recipientKeyID: wrap.recipientKeyID, check: wrap.check,
                wrapped: wrap.wrapped),
        ] {
            #expect(throws: SyncError.self) { try laptop.unwrap(moved) }
        }
        // A check that is not the key's.
        var badCheck = wrap
        badCheck.check = Data(repeating: 0, count: 8)
        let mismatch = try #require(throws: SyncError.self) { try laptop.unwrap(badCheck) }
        #expect(mismatch.message.contains("check"), "\(mismatch.message)")
    }

    @Test("F129 malformed wraps are invalidArguments naming the zone")
    func malformedWraps() throws {
        let wrap = Self.key.wrapped(for: DeviceKeyPair().publicKey)
        var versionZero = wrap
        versionZero.version = 0
        var shortCheck = wrap
        shortCheck.check = Data([1])
        var badID = wrap
        badID.recipientKeyID = "XYZ"
        var short = wrap
        short.wrapped = wrap.wrapped.prefix(50)
        for (bad, reason) in [
            (versionZero, "starts at 1"), (shortCheck, "check holds 1 bytes"), (badID, "32 lowercase hex"),
            (short, "holds 50 bytes"),
        ] {
            let error = try #require(throws: SyncError.self) { try bad.validate() }
            #expect(error.code == .invalidArguments && error.item == .zone(Fixture.notes))
            #expect(error.message.contains(reason), "\(error.message)")
        }
        #expect(throws: SyncError.self) { try DevicePublicKey(rawRepresentation: Data(count: 31)) }
    }

    @Test("F129 a device key is kept in its file across launches, readable by its owner only")
    func deviceKeyFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("DeviceKey")
        let first = try DeviceKeyPair.loadOrCreate(at: file)
        let again = try DeviceKeyPair.loadOrCreate(at: file)
        #expect(first.publicKey == again.publicKey)
        let permissions = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber
        #expect(permissions?.intValue == 0o600)
        try Data("not a key".utf8).write(to: file)
        let error = try #require(throws: SyncError.self) { try DeviceKeyPair.loadOrCreate(at: file) }
        #expect(error.code == .invalidArguments && error.message.contains(file.path), "\(error.message)")
    }

    @Test("F129 encrypted references, assets and nested encryption are refused; other values are not")
    func encryptedValueRules() throws {
        let cases: [(RecordValue, String)] = [
            (.reference(Record.Reference(recordID: Fixture.n2)), "cannot hold a reference"),
            (.list([.reference(Record.Reference(recordID: Fixture.n2))]), "list of references"),
            (.asset(Asset(digest: AssetHasher.digest(of: [1]), size: 1)), "cannot hold an asset"),
            (.list([.asset(Asset(digest: AssetHasher.digest(of: [1]), size: 1))]), "list of assets"),
            (.encrypted(.opened(.string("x"))), "cannot hold an encrypted value"),
            (.location(Location(latitude: 91, longitude: 0)), "latitude 91.0 is outside"),
        ]
        for (value, reason) in cases {
            var record = Record(recordType: "Note", recordID: Fixture.n1)
            record.encryptedValues["secret"] = value
            let error = try #require(throws: SyncError.self) { try record.validate() }
            #expect(error.code == .invalidArguments && error.item == .record(Fixture.n1))
            #expect(error.message.contains("\"secret\"") && error.message.contains(reason), "\(error.message)")
        }
        var record = Record(recordType: "Note", recordID: Fixture.n1)
        record["tags"] = .list([.encrypted(.opened(.string("x")))])
        #expect(throws: SyncError.self) { try record.validate() }
        record["tags"] = nil
        record.encryptedValues["secret"] = .list([.string("a"), .string("b")])
        record["title"] = "plain"
        try record.validate()
        #expect(record.encryptedValues["secret"] == .list([.string("a"), .string("b")]))
        #expect(record.encryptedValues["title"] == nil)
        #expect(record.encryptedValues.allKeys() == ["secret"])
        #expect(record.changedKeys() == ["secret", "tags", "title"])
        #expect(record.openedEncryptedKeys == ["secret"])
        // The size counts the sealing's nonce and tag.
        #expect(record.estimatedSize == "secret".utf8.count + 2 + SealedValue.overhead + "title".utf8.count + 5)
    }

    @Test("F129 the description of an encrypted value never shows its plaintext")
    func descriptionsHidePlaintext() {
        let value = EncryptedValue.opened(.string("the diagnosis"))
        #expect(!value.description.contains("diagnosis"))
        #expect(!String(describing: Self.key).contains(Self.key.check.map { String($0) }.joined()))
    }
}
