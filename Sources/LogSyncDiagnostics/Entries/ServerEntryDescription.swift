import LogStore
import LogSyncServer
import SyncModel

/// How a server log entry is described for people and tools (an ``EntryDescription``): the name of its kind and its salient
/// fields, in a fixed order. It is what `logtool dump` prints for the server's kinds: 101–116 and
/// 118–119 in a database's log (`ServerEntry`), and 117 (`schemaDeployed`) and 120–121 in the user
/// registry's log (`UserRegistry`).
///
/// ```swift
/// if let description = try ServerEntryDescription.describe(entry) {
///     print(description.kindName, description.fields.map { "\($0.name)=\($0.value)" })
///     // recordSaved ["zone=Notes", "record=n1", "type=Note", "tag=12", "keys=[body,title]"]
/// }
/// ```
///
/// Fields appear in this order, each only where its kind has it; names are stable, for scripts:
///
/// | field | kinds | value |
/// |---|---|---|
/// | `zone`, `owner` | zone and record kinds, zone subscriptions, client change tokens, assetStored (the zone the upload was for; none in logs written before contents were granted per zone) | zone name; owner record name, only when not the current user (`__defaultOwner__`) |
/// | `record`, `type` | recordSaved, recordDeleted | record name; record type |
/// | `tag` | recordSaved | the change tag, which the server sets to the entry's offset |
/// | `keys`, `changed`, `parent`, `assets` | recordSaved | field keys (sorted); changed keys, only if any; parent record name, only if set; `record.field:digest/sizeB` per asset, only if any (the server keeps contents apart) |
/// | `root`, `publicPermission`, `participants` | recordSaved of a share (`cloudkit.share`) | root record name, only for a hierarchy share; the public permission; `user:role:permission:status` per participant (the user record name, or the e-mail address when no user is known) |
/// | `capabilities`, `share` | zoneSaved | capability names; share record name, only if shared |
/// | `reason` | zoneDeleted | deleted, purged or encryptedDataReset |
/// | `subscription`, `kind` | subscription kinds | subscription ID; `database` or `zone` (then `zone` follows) |
/// | `request`, `fingerprint`, `saved`, `deleted`, `failed`, `errors`, `actor`, `group` | requestCompleted, requestOutcome | request ID; content checksum (hex); item counts; `record:code` per failed item, only if any; the participant who sent it (`_user<N>`), only when not the database's user; the ID of its operation group (F69), only if it had one |
/// | `group`, `name`, `quantity`, `sendSize`, `receiveSize`, `firstRequest`, `device` | operationGroupStarted | the group's ID; its name, only if set; its quantity, only if not 0; its expected sizes, only if not `unknown`; the operation that first carried it; the device that sent it, only if named |
/// | `horizon` | tombstonesCompacted | the last offset whose tombstones were dropped |
/// | `device`, `token`, `tokenSize` | clientChangeTokenUpdated | sending device, only if named; token bytes in hex (the first 32, then `…`); its length |
/// | `share`, `ownerOffset` | sharedZoneJoined, sharedZoneChanged | (with `zone`, `owner`) the share record name, joined only; the owner's log offset seen |
/// | `reason` | sharedZoneLeft | left, removed, shareDeleted or zoneDeleted |
/// | `asset`, `size` | assetStored | the content's digest (`sha256:` and 64 hex digits); its size in bytes |
/// | `assets` | assetsDeleted | the digests of the contents deleted |
/// | `types`, `fields` | schemaDeployed | the record types, sorted; `Type.field:kind` per field (`Note.title:string`, `Note.tags:list<string>`), sorted |
/// | `key`, `user`, `keySize` | deviceKeyRegistered | the device key's ID (never its bytes); the user's record name; the key's size in bytes |
/// | `wraps`, `wrapCount`, `wrapBytes` | zoneKeysSaved | `zone[@owner]:v<version>:<recipient key ID>` per wrap (never its bytes); how many; their check and wrapped bytes together |
/// | `user`, `directory` | userRegistered | the user ID; the user's environment under the data directory (`users/u<offset>`) |
/// | `userNumber`, `email` | userEmailSet | the user's number (their record name is `_user<N>`); the e-mail address |
/// | `userNumber`, `user` | userDeleted | the deleted user's number; their user ID |
enum ServerEntryDescription: EntryKindCatalog {
    /// Every kind a server log holds, with its name, in kind order: a database log's, then the
    /// user registry's.
    static let kinds: [(kind: EntryKind, name: String)] =
        ServerEntry.Kind.named + [
            (UserRegistry.userRegisteredKind, "userRegistered"), (UserRegistry.userEmailSetKind, "userEmailSet"),
            (UserRegistry.userDeletedKind, "userDeleted"),
        ]

    /// Describes `entry`, or returns `nil` when its kind is not a server kind (the entry then
    /// belongs to some other layer, and a tool shows its bytes instead).
    ///
    /// Pure: the description depends only on the entry's offset, kind and payload.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the entry's offset when the payload is
    ///   not a valid entry of its kind (as `ServerEntry.init(_:)` reports it).
    static func describe(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription? {
        if entry.kind == UserRegistry.userRegisteredKind { return try Self.userRegistered(entry) }
        if entry.kind == UserRegistry.userEmailSetKind { return try Self.userEmailSet(entry) }
        if entry.kind == UserRegistry.userDeletedKind { return try Self.userDeleted(entry) }
        guard let name = Self.kindName(of: entry.kind) else { return nil }
        return EntryDescription(kindName: name, fields: Self.fields(of: try ServerEntry(entry)))
    }

    // MARK: Fields of each kind

    private static func fields(of entry: ServerEntry) -> [Field] {
        var fields: [Field] = []
        func add(_ name: String, _ value: Value) { fields.append(Field(name, value)) }
        /// The fields of a completed request: `response`'s results, and `alsoSaved` records saved
        /// besides them.
        func addRequest(
            _ requestID: RequestID, _ fingerprint: UInt32, _ response: ModifyRecordsResponse, alsoSaved: UInt64 = 0,
            actor: UInt64
        ) {
            add("request", .text(requestID.rawValue))
            add("fingerprint", .text(hex32(fingerprint)))
            var failures: [(Record.ID, SyncError.Code)] = []
            var saved: UInt64 = alsoSaved
            var deleted: UInt64 = 0
            for (recordID, result) in response.saveResults {
                switch result {
                case .success: saved += 1
                case .failure(let error): failures.append((recordID, error.code))
                }
            }
            for (recordID, result) in response.deleteResults {
                switch result {
                case .success: deleted += 1
                case .failure(let error): failures.append((recordID, error.code))
                }
            }
            add("saved", .integer(saved))
            add("deleted", .integer(deleted))
            add("failed", .integer(UInt64(failures.count)))
            if !failures.isEmpty {
                // Dictionaries have no order: sort so the same entry always reads the same.
                let sorted = failures.sorted { a, b in
                    (a.0.recordName, a.0.zoneID.zoneName, a.0.zoneID.ownerName, a.1.rawValue)
                        < (b.0.recordName, b.0.zoneID.zoneName, b.0.zoneID.ownerName, b.1.rawValue)
                }
                add("errors", .list(sorted.map { "\($0.0.recordName):\($0.1.name)" }))
            }
            if actor != 0 { add("actor", .text("_user\(actor)")) }
        }
        func addZone(_ zoneID: RecordZone.ID) {
            add("zone", .text(zoneID.zoneName))
            if zoneID.ownerName != RecordZone.ID.defaultOwnerName { add("owner", .text(zoneID.ownerName)) }
        }

        switch entry {
        case .zoneSaved(let zone):
            addZone(zone.zoneID)
            add("capabilities", .list(capabilityNames(zone.capabilities)))
            if let share = zone.share { add("share", .text(share.recordID.recordName)) }
        case .zoneDeleted(let zoneID, let reason):
            addZone(zoneID)
            add("reason", .text("\(reason)"))
        case .recordSaved(let record):
            addZone(record.recordID.zoneID)
            add("record", .text(record.recordID.recordName))
            add("type", .text(record.recordType))
            if let tag = record.recordChangeTag { add("tag", .text(tag)) }
            add("keys", .list(record.allKeys()))
            let changed = record.changedKeys()
            if !changed.isEmpty { add("changed", .list(changed)) }
            if let parent = record.parent { add("parent", .text(parent.recordID.recordName)) }
            if record.hasAssets { add("assets", .list(record.listedAssets(withCacheState: false))) }
            if record.recordType == Share.recordType, let share = try? Share(record: record) {
                if let root = share.rootRecordID { add("root", .text(root.recordName)) }
                add("publicPermission", .text("\(share.publicPermission)"))
                add(
                    "participants",
                    .list(
                        share.participants.map { participant in
                            let who =
                                participant.userIdentity.userRecordName ?? participant.userIdentity.emailAddress ?? "?"
                            return
                                "\(who):\(participant.role):\(participant.permission):\(participant.acceptanceStatus)"
                        }))
            }
        case .recordDeleted(let recordID, let recordType):
            addZone(recordID.zoneID)
            add("record", .text(recordID.recordName))
            add("type", .text(recordType))
        case .subscriptionSaved(let subscription):
            add("subscription", .text(subscription.subscriptionID.rawValue))
            switch subscription.kind {
            case .database:
                add("kind", .text("database"))
            case .recordZone(let zoneID):
                add("kind", .text("zone"))
                addZone(zoneID)
            }
        case .subscriptionDeleted(let subscriptionID):
            add("subscription", .text(subscriptionID.rawValue))
        case .requestCompleted(let requestID, let fingerprint, let response, let actor):
            addRequest(requestID, fingerprint, response, actor: actor)
        case .requestOutcome(let requestID, let fingerprint, let outcome, let actor):
            // The same fields as requestCompleted: the saved records are counted, not read.
            addRequest(requestID, fingerprint, outcome.others, alsoSaved: UInt64(outcome.saved.count), actor: actor)
            if let group = outcome.operationGroupID { add("group", .text(group)) }
        case .operationGroupStarted(let group, let firstRequest, let device):
            add("group", .text(group.operationGroupID))
            if let name = group.name { add("name", .text(name)) }
            if group.quantity != 0 { add("quantity", .integer(UInt64(group.quantity))) }
            if group.expectedSendSize != .unknown { add("sendSize", .text("\(group.expectedSendSize)")) }
            if group.expectedReceiveSize != .unknown {
                add("receiveSize", .text("\(group.expectedReceiveSize)"))
            }
            add("firstRequest", .text(firstRequest))
            if let device { add("device", .text(device.rawValue)) }
        case .tombstonesCompacted(let horizon):
            add("horizon", .integer(horizon.rawValue))
        case .clientChangeTokenUpdated(let zoneID, let device, let token):
            addZone(zoneID)
            if let device { add("device", .text(device.rawValue)) }
            add("token", .text(hex(token.prefix(32)) + (token.count > 32 ? "…" : "")))
            add("tokenSize", .integer(UInt64(token.count)))
        case .sharedZoneJoined(let zoneID, let share, let ownerOffset):
            addZone(zoneID)
            add("share", .text(share.recordName))
            add("ownerOffset", .integer(ownerOffset))
        case .sharedZoneChanged(let zoneID, let ownerOffset):
            addZone(zoneID)
            add("ownerOffset", .integer(ownerOffset))
        case .sharedZoneLeft(let zoneID, let reason):
            addZone(zoneID)
            add("reason", .text("\(reason)"))
        case .assetStored(let digest, let size, let zoneID):
            if let zoneID { addZone(zoneID) }
            add("asset", .text(digest.description))
            add("size", .integer(UInt64(size)))
        case .assetsDeleted(let digests):
            add("assets", .list(digests.map(\.description)))
        case .schemaDeployed(let schema):
            let types = schema.recordTypes.keys.sorted()
            add("types", .list(types))
            add(
                "fields",
                .list(
                    types.flatMap { type in
                        schema.recordTypes[type]!.sorted { $0.key < $1.key }.map { "\(type).\($0.key):\($0.value)" }
                    }))
        case .deviceKeyRegistered(let key):
            add("key", .text(key.keyID))
            if let user = key.userRecordName { add("user", .text(user)) }
            add("keySize", .integer(UInt64(key.rawRepresentation.count)))
        case .zoneKeysSaved(let keys):
            add(
                "wraps",
                .list(
                    keys.map { wrap in
                        let zone =
                            wrap.zoneID.ownerName == RecordZone.ID.defaultOwnerName
                            ? wrap.zoneID.zoneName : "\(wrap.zoneID.zoneName)@\(wrap.zoneID.ownerName)"
                        return "\(zone):v\(wrap.version):\(wrap.recipientKeyID)"
                    }))
            add("wrapCount", .integer(UInt64(keys.count)))
            add("wrapBytes", .integer(UInt64(keys.reduce(0) { $0 + $1.check.count + $1.wrapped.count })))
        }
        return fields
    }

    /// A registry entry: the payload is the user ID in UTF-8, the offset the user's number.
    private static func userRegistered(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription {
        guard !entry.payload.isEmpty, let user = String(validating: entry.payload, as: UTF8.self) else {
            throw LogStoreError(
                .corruptEntry,
                "userRegistered (kind \(entry.kind)) payload: \(entry.payload.isEmpty ? "an empty user ID" : "a user ID that is not UTF-8")",
                offset: entry.offset)
        }
        return EntryDescription(
            kindName: "userRegistered",
            fields: [
                Field("user", .text(user)),
                Field("directory", .text("users/u\(entry.offset.rawValue)")),
            ])
    }

    /// A registry entry giving a user an e-mail address: the user's number (8 bytes,
    /// big-endian), then the address in UTF-8.
    private static func userEmailSet(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription {
        guard entry.payload.count > 8, let email = String(validating: entry.payload[8...], as: UTF8.self) else {
            throw LogStoreError(
                .corruptEntry, "userEmailSet (kind \(entry.kind)) payload: not a user number and an e-mail address",
                offset: entry.offset)
        }
        let number = entry.payload[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return EntryDescription(
            kindName: "userEmailSet",
            fields: [
                Field("userNumber", .integer(number)),
                Field("email", .text(email)),
            ])
    }

    private static func userDeleted(_ entry: LogEntry) throws(LogStoreError) -> EntryDescription {
        guard entry.payload.count > 8, let user = String(validating: entry.payload[8...], as: UTF8.self) else {
            throw LogStoreError(
                .corruptEntry, "userDeleted (kind \(entry.kind)) payload: not a user number and a user ID",
                offset: entry.offset)
        }
        let number = entry.payload[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return EntryDescription(
            kindName: "userDeleted",
            fields: [
                Field("userNumber", .integer(number)),
                Field("user", .text(user)),
            ])
    }

    private static func capabilityNames(_ capabilities: RecordZone.Capabilities) -> [String] {
        let known: [(RecordZone.Capabilities, String)] = [
            (.fetchChanges, "fetchChanges"), (.atomic, "atomic"), (.sharing, "sharing"),
            (.zoneWideSharing, "zoneWideSharing"),
        ]
        var names = known.filter { capabilities.contains($0.0) }.map(\.1)
        let unknown = capabilities.subtracting(RecordZone.Capabilities(known.map(\.0)))
        if !unknown.isEmpty { names.append("0x" + String(unknown.rawValue, radix: 16)) }
        return names
    }

    private static func hex32(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    private static func hex(_ bytes: some Collection<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
