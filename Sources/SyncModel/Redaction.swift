import Crypto
import Foundation
import Synchronization

/// What a support bundle keeps of a user's data, and the key its hashes are made with
/// (Docs/Privacy.md).
///
/// The device's export and the server's extract of the same user redact with this type and the
/// same key, so that a value hashes alike on both sides.
///
/// ```swift
/// let redactor = Redactor(settings: .init(keepInClear: ["title"]))
/// redactor.redact(.string("Groceries"), field: "body")   // .string("‹redacted string, 9 bytes, h:3f2a…›")
/// ```
package struct Redactor: Sendable {
    /// What is redacted.
    package struct Settings: Sendable, Hashable {
        /// Field values are replaced by their type, size and keyed hash; `false` keeps them.
        package var redactValues: Bool
        /// The fields whose values stay in clear (not encrypted ones, which never do).
        package var keepInClear: Set<String>
        /// Record, zone and owner names are replaced by their keyed hash.
        package var hashNames: Bool

        package init(redactValues: Bool = true, keepInClear: Set<String> = [], hashNames: Bool = true) {
            self.redactValues = redactValues
            self.keepInClear = keepInClear
            self.hashNames = hashNames
        }
    }

    /// The number of bytes of HMAC-SHA256 a hash keeps (96 bits: no collision in any real log).
    package static let hashBytes = 12

    package let settings: Settings
    /// The per-bundle key, 32 bytes.
    package let key: [UInt8]
    /// An HMAC already keyed with `key`: each hash copies it rather than deriving the key's pads again.
    private let keyed: HMAC<SHA256>
    /// Names already hashed: a log names the same records and zones again and again.
    private let hashedNames = NameMemo()

    /// The key's identifier: the first 8 bytes of SHA-256 of the key, in hex. Names the key
    /// without revealing it.
    package var keyID: String { Self.hex(Array(SHA256.hash(data: key)).prefix(8)) }

    /// A redactor with a fresh random key (or `key`, to match another bundle's hashes).
    package init(settings: Settings, key: [UInt8]? = nil) {
        self.settings = settings
        if let key {
            self.key = key
        } else {
            var generator = SystemRandomNumberGenerator()
            self.key = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        }
        keyed = HMAC<SHA256>(key: SymmetricKey(data: self.key))
    }

    /// The keyed hash of `bytes` in a domain (`"v"` values, `"n"` names), truncated, in hex.
    package func hash(_ bytes: some Sequence<UInt8>, domain: String) -> String {
        var hmac = keyed
        hmac.update(data: Array(domain.utf8) + [0])
        hmac.update(data: Array(bytes))
        return Self.hex(Array(hmac.finalize()).prefix(Self.hashBytes))
    }

    // MARK: Names

    /// The names every database holds, kept in clear: `_defaultZone` and `__defaultOwner__`.
    /// Other names starting with `_` (a user's record name, `_user12`) are hashed like any.
    package static let systemNames: Set<String> = [RecordZone.ID.defaultZoneName, RecordZone.ID.defaultOwnerName]

    /// A record, zone or owner name as a bundle holds it: `h-<hash>`, or the name itself when
    /// names are not hashed or it is one of the ``systemNames``.
    package func name(_ name: String) -> String {
        guard settings.hashNames, !Self.systemNames.contains(name) else { return name }
        if let known = hashedNames.value(for: name) { return known }
        let hashed = "h-" + hash(name.utf8, domain: "n")
        hashedNames.store(hashed, for: name)
        return hashed
    }

    package func zoneID(_ id: RecordZone.ID) -> RecordZone.ID {
        RecordZone.ID(zoneName: name(id.zoneName), ownerName: name(id.ownerName))
    }

    package func recordID(_ id: Record.ID) -> Record.ID {
        Record.ID(recordName: name(id.recordName), zoneID: zoneID(id.zoneID))
    }

    package func reference(_ reference: Record.Reference) -> Record.Reference {
        Record.Reference(recordID: recordID(reference.recordID), action: reference.action)
    }

    package func zone(_ zone: RecordZone) -> RecordZone {
        RecordZone(zoneID: zoneID(zone.zoneID), capabilities: zone.capabilities, share: zone.share.map(reference))
    }

    package func itemID(_ item: SyncError.ItemID) -> SyncError.ItemID {
        switch item {
        case .record(let id): .record(recordID(id))
        case .zone(let id): .zone(zoneID(id))
        case .subscription: item
        }
    }

    package func zoneToken(_ token: ZoneChangeToken) -> ZoneChangeToken {
        ZoneChangeToken(
            zoneID: zoneID(token.zoneID), incarnation: token.incarnation, offset: token.offset,
            database: token.database, listingStart: token.listingStart)
    }

    /// An operation group as a bundle holds it: its name hashed (an app may name a group after
    /// what the user did), its ID, quantity and sizes kept.
    package func operationGroup(_ group: OperationGroup) -> OperationGroup {
        var redacted = group
        redacted.name = group.name.map(name)
        return redacted
    }

    /// A subscription as a bundle holds it: the zone it watches named by its hash.
    package func subscription(_ subscription: Subscription) -> Subscription {
        switch subscription.kind {
        case .database: subscription
        case .recordZone(let id):
            Subscription(subscriptionID: subscription.subscriptionID, kind: .recordZone(zoneID(id)))
        }
    }

    /// Bytes only their sender reads (a client change token): the keyed hash of them, so that
    /// equal tokens stay equal and none is revealed.
    package func opaque(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var hmac = HMAC<SHA256>(key: SymmetricKey(data: key))
        hmac.update(data: Array("o".utf8) + [0])
        hmac.update(data: Array(bytes))
        return Array(hmac.finalize())
    }

    /// An asset content's digest as a bundle holds it: the keyed hash of the digest, itself a
    /// digest's 32 bytes, so that one content is named alike everywhere and never by its own
    /// digest (which a guess of the content would confirm).
    package func assetDigest(_ digest: AssetDigest) -> AssetDigest {
        // 32 bytes always make a digest.
        (try? AssetDigest(bytes: opaque(digest.bytes))) ?? digest
    }

    /// A device's public key as a bundle holds it: the key kept (it is public, and names the
    /// device as its ID does), the user's record name hashed.
    package func devicePublicKey(_ key: DevicePublicKey) -> DevicePublicKey {
        var redacted = key
        redacted.userRecordName = key.userRecordName.map(name)
        return redacted
    }

    /// A zone key wrapped for a device as a bundle holds it: its zone hashed, its version and
    /// recipient kept, its check and sealed bytes replaced by zeros of their size (encrypted
    /// content is never included).
    package func wrappedZoneKey(_ wrapped: WrappedZoneKey) -> WrappedZoneKey {
        WrappedZoneKey(
            zoneID: zoneID(wrapped.zoneID), version: wrapped.version, recipientKeyID: wrapped.recipientKeyID,
            check: Data(count: wrapped.check.count), wrapped: Data(count: wrapped.wrapped.count))
    }

    /// A modify response as a bundle holds it: every saved record and error redacted, keyed by
    /// hashed IDs.
    package func modifyRecordsResponse(_ response: ModifyRecordsResponse) -> ModifyRecordsResponse {
        ModifyRecordsResponse(
            saveResults: Dictionary(
                response.saveResults.map { id, result in
                    (recordID(id), result.map(record).mapError(error))
                }, uniquingKeysWith: { first, _ in first }),
            deleteResults: Dictionary(
                response.deleteResults.map { id, result in (recordID(id), result.mapError(error)) },
                uniquingKeysWith: { first, _ in first }))
    }

    // MARK: Values

    /// A field's value as a bundle holds it. Redacted, it is a string
    /// `‹redacted TYPE, N bytes, h:HASH›`: its type, its size and the keyed hash of its encoding
    /// (`keepInClear` fields keep their value). An encrypted value is `‹encrypted, N bytes›` in
    /// every case: neither its plaintext nor its sealed box nor a hash of either. An asset is its
    /// size and the keyed hash of its digest: never its contents, its file or its digest.
    package func value(_ value: RecordValue, field: String) -> RecordValue {
        if case .encrypted = value {
            return .string("‹encrypted, \(value.estimatedSize) bytes›")
        }
        if !settings.redactValues || settings.keepInClear.contains(field) {
            return clearValue(value)
        }
        return .string(
            "‹redacted \(value.kindName), \(Self.size(of: value)) bytes, h:\(hash(Self.bytes(of: value), domain: "v"))›"
        )
    }

    /// A value kept in clear: references name hashed records, assets lose their file, and
    /// encrypted values inside a list are still withheld.
    private func clearValue(_ value: RecordValue) -> RecordValue {
        switch value {
        case .reference(let target): .reference(reference(target))
        case .asset(let asset): .asset(asset.withoutFile)
        case .list(let values): .list(values.map { clearValueOrWithheld($0) })
        default: value
        }
    }

    private func clearValueOrWithheld(_ value: RecordValue) -> RecordValue {
        if case .encrypted = value { return .string("‹encrypted, \(value.estimatedSize) bytes›") }
        return clearValue(value)
    }

    /// A record as a bundle holds it: names hashed, every field's value redacted, system fields
    /// kept (their user IDs hashed).
    package func record(_ record: Record) -> Record {
        var values: [String: RecordValue] = [:]
        for key in record.allKeys() {
            if let field = record[key] { values[key] = value(field, field: key) }
        }
        let system = record.systemFields
        return Record(
            recordType: record.recordType, recordID: recordID(record.recordID), values: values,
            changed: Set(record.changedKeys()), parent: record.parent.map(reference),
            parentChanged: record.isParentChanged,
            systemFields: Record.SystemFields(
                recordChangeTag: system.recordChangeTag, creationDate: system.creationDate,
                modificationDate: system.modificationDate,
                creatorUserRecordID: system.creatorUserRecordID.map(recordID),
                lastModifiedUserRecordID: system.lastModifiedUserRecordID.map(recordID),
                share: system.share.map(reference)))
    }

    /// An error as a bundle holds it: its code, kind and timing kept; its message replaced
    /// (messages quote names and values); its records, item and partial errors redacted.
    package func error(_ error: SyncError) -> SyncError {
        var redacted = error
        if settings.redactValues || settings.hashNames {
            redacted.message = "‹message redacted, \(error.message.utf8.count) bytes›"
            redacted.cause = error.cause.map { "‹cause redacted, \($0.utf8.count) bytes›" }
        }
        redacted.item = error.item.map(itemID)
        redacted.serverRecord = error.serverRecord.map(record)
        redacted.clientRecord = error.clientRecord.map(record)
        redacted.ancestorRecord = error.ancestorRecord.map(record)
        redacted.partialErrors = Dictionary(
            error.partialErrors.map { (itemID($0.key), self.error($0.value)) }, uniquingKeysWith: { first, _ in first })
        return redacted
    }

    /// The size of a value in bytes, as `estimatedSize` counts it.
    static func size(of value: RecordValue) -> Int {
        switch value {
        case .asset(let asset): Int(asset.size ?? 0)
        default: value.estimatedSize
        }
    }

    /// The bytes a value's hash covers: its type, then a canonical encoding of it.
    static func bytes(of value: RecordValue) -> [UInt8] {
        var out = Array(value.kindName.utf8) + [0]
        switch value {
        case .string(let text): out += Array(text.utf8)
        case .int64(let number): out += withUnsafeBytes(of: number.bigEndian) { Array($0) }
        case .double(let number): out += withUnsafeBytes(of: number.bitPattern.bigEndian) { Array($0) }
        case .bool(let flag): out.append(flag ? 1 : 0)
        case .bytes(let data): out += Array(data)
        case .date(let date): out += withUnsafeBytes(of: date.timeIntervalSince1970.bitPattern.bigEndian) { Array($0) }
        case .reference(let target):
            out += Array("\(target.recordID.recordName)\u{0}\(target.recordID.zoneID.zoneName)".utf8)
            out += Array("\u{0}\(target.recordID.zoneID.ownerName)".utf8)
        case .asset(let asset):
            out += asset.digest?.bytes ?? []
            out += withUnsafeBytes(of: (asset.size ?? 0).bigEndian) { Array($0) }
        case .location(let location): out += Array(String(describing: location).utf8)
        case .list(let values):
            for element in values {
                let encoded = bytes(of: element)
                out += withUnsafeBytes(of: UInt32(encoded.count).bigEndian) { Array($0) } + encoded
            }
        case .encrypted: break
        }
        return out
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The names a ``Redactor`` has hashed, at most ``capacity`` of them (then it starts again), so
/// that memory stays bounded whatever the log names.
private final class NameMemo: Sendable {
    static let capacity = 65_536
    private let names = Mutex<[String: String]>([:])

    func value(for name: String) -> String? { names.withLock { $0[name] } }

    func store(_ hashed: String, for name: String) {
        names.withLock { names in
            if names.count >= Self.capacity { names.removeAll(keepingCapacity: true) }
            names[name] = hashed
        }
    }
}
