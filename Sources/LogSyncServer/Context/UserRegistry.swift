import Foundation
import LogStore
import SyncModel
import Synchronization

/// The server's users: each user ID gets a number, the offset of its registration in the
/// registry's log. The number names the user's data directory and user record, so user IDs of
/// any form (e-mail addresses, account URLs) are safe on disk and never collide.
///
/// A user may also have an e-mail address (`logsync-server user add alice --email …`), by which
/// an owner invites them to a share; the registry finds a user by it, and a user ID by number.
package final class UserRegistry: Sendable {
    /// Payload: the user ID in UTF-8.
    package static let userRegisteredKind: EntryKind = 120
    /// Payload: the user's number (8 bytes, big-endian), then the e-mail address in UTF-8.
    package static let userEmailSetKind: EntryKind = 121
    /// Payload: the user's number (8 bytes, big-endian), then the user ID in UTF-8. The user is
    /// no longer registered: their ID and e-mail address leave the index, and registering the ID
    /// again gives it a new number (and so empty databases).
    package static let userDeletedKind: EntryKind = 122

    /// user ID (UTF-8) → its number; e-mail address (lowercased) → number; number → address (as
    /// given), for the users registered and not deleted since; in `schema`, `deployed` → the offset of the latest `schemaDeployed` entry (F137);
    /// as a projection of the registry log.
    struct Index: Projection {
        let name = "users"
        /// 2: e-mail addresses. 3: the deployed schema.
        let version: UInt32 = 3
        let tableNames = ["byID", "byEmail", "emailOf", "schema"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            switch entry.kind {
            case ServerEntry.Kind.schemaDeployed:
                // a corrupt schema fails here, naming its offset
                _ = try (entry.decoded as? ServerEntry) ?? ServerEntry(entry)
                try tables.put(bigEndian(entry.offset.rawValue), forKey: UserRegistry.deployedSchemaKey, in: "schema")
            case UserRegistry.userRegisteredKind:
                try tables.put(bigEndian(entry.offset.rawValue), forKey: entry.payload, in: "byID")
            case UserRegistry.userEmailSetKind:
                guard entry.payload.count > 8 else {
                    throw LogStoreError(
                        .corruptEntry, "an e-mail entry of \(entry.payload.count) bytes", offset: entry.offset)
                }
                let number = Array(entry.payload[0..<8])
                let email = String(decoding: entry.payload[8...], as: UTF8.self)
                if let old = try tables.value(forKey: number, in: "emailOf") {
                    _ = try tables.removeValue(
                        forKey: UserRegistry.emailKey(String(decoding: old, as: UTF8.self)), in: "byEmail")
                }
                try tables.put(number, forKey: UserRegistry.emailKey(email), in: "byEmail")
                try tables.put(Array(email.utf8), forKey: number, in: "emailOf")
            case UserRegistry.userDeletedKind:
                guard entry.payload.count > 8 else {
                    throw LogStoreError(
                        .corruptEntry, "a user deletion of \(entry.payload.count) bytes", offset: entry.offset)
                }
                let number = Array(entry.payload[0..<8])
                let id = Array(entry.payload[8...])
                if try tables.value(forKey: id, in: "byID") == number {
                    _ = try tables.removeValue(forKey: id, in: "byID")
                }
                if let old = try tables.value(forKey: number, in: "emailOf") {
                    _ = try tables.removeValue(
                        forKey: UserRegistry.emailKey(String(decoding: old, as: UTF8.self)), in: "byEmail")
                    _ = try tables.removeValue(forKey: number, in: "emailOf")
                }
            default:
                throw LogStoreError(.corruptEntry, "kind \(entry.kind) is not a registry entry", offset: entry.offset)
            }
        }
    }

    let log: any ServerLog
    private let known = Mutex<[UserID: UInt64]>([:])

    init(storage: any ServerStorage) throws {
        log = try storage.openLog(.registry, projection: ServerLogName.registry.serverProjection)
    }

    /// The number of `user`, registering the user on first sight.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a user ID that breaks the rules of
    ///   `Identifier.userID` (empty, over 511 bytes, a control character…).
    func number(of user: UserID) throws -> UInt64 {
        if let number = known.withLock({ $0[user] }) { return number }
        try user.validate()
        let key = Array(user.rawValue.utf8)
        let (stored, offsets) = try log.write { index -> (entries: [NewEntry], result: UInt64?) in
            if let stored = try index.value(forKey: key, in: "byID") {
                return ([], stored.withUnsafeBytes { readBigEndian($0) })
            }
            return ([NewEntry(kind: Self.userRegisteredKind, payload: key)], nil)
        }
        let number = stored ?? offsets.lowerBound.rawValue
        known.withLock { $0[user] = number }
        return number
    }

    /// Every registered user and their number, in the order of their IDs' bytes.
    func allUsersAndNumbers() throws -> [(user: UserID, number: UInt64)] {
        try log.read { index in
            var users: [(UserID, UInt64)] = []
            try index.forEach(in: "byID", from: nil) { key, value in
                users.append((UserID(rawValue: String(decoding: key, as: UTF8.self)), readBigEndian(value)))
                return true
            }
            return users
        }
    }

    /// Every registered user, in the order of their IDs' bytes.
    func allUsers() throws -> [UserID] {
        try log.read { index in
            var users: [UserID] = []
            try index.forEach(in: "byID", from: nil) { key, _ in
                users.append(UserID(rawValue: String(decoding: key, as: UTF8.self)))
                return true
            }
            return users
        }
    }

    /// The user whose number is `number`, or `nil` if no user has it (never had it, or was
    /// deleted). Registers nobody.
    func user(number: UInt64) throws -> UserID? {
        guard number > 0 else { return nil }
        return try log.read { index -> UserID? in
            guard let entry = try index.entry(at: LogOffset(number)), entry.kind == Self.userRegisteredKind,
                try index.value(forKey: entry.payload, in: "byID") == bigEndian(number)
            else { return nil }
            return UserID(rawValue: String(decoding: entry.payload, as: UTF8.self))
        }
    }

    /// The number of `user` if they are registered, without registering them.
    func registeredNumber(of user: UserID) throws -> UInt64? {
        try log.read { index in
            try index.value(forKey: Array(user.rawValue.utf8), in: "byID").map {
                $0.withUnsafeBytes { readBigEndian($0) }
            }
        }
    }

    /// Up to `limit` registered users whose IDs come after `after` (from the first without it),
    /// in the order of their IDs' bytes, with their numbers and e-mail addresses: one read of
    /// the index, however many users there are.
    func users(after: UserID?, limit: Int) throws -> [(user: UserID, number: UInt64, email: String?)] {
        guard limit > 0 else { return [] }
        return try log.read { index in
            var found: [(UserID, UInt64)] = []
            let start = after.map { Array($0.rawValue.utf8) }
            try index.forEach(in: "byID", from: start) { key, value in
                if let start, key.elementsEqual(start) { return true }
                found.append((UserID(rawValue: String(decoding: key, as: UTF8.self)), readBigEndian(value)))
                return found.count < limit
            }
            return try found.map { user, number in
                (
                    user, number,
                    try index.value(forKey: bigEndian(number), in: "emailOf").map {
                        String(decoding: $0, as: UTF8.self)
                    }
                )
            }
        }
    }

    /// Deletes `user`'s registration (their ID and e-mail address) and returns the number they
    /// had, or `nil` if they were not registered. Their number is never given again.
    func delete(_ user: UserID) throws -> UInt64? {
        let key = Array(user.rawValue.utf8)
        let (number, _) = try log.write { index -> (entries: [NewEntry], result: UInt64?) in
            guard let stored = try index.value(forKey: key, in: "byID") else { return ([], nil) }
            return (
                [NewEntry(kind: Self.userDeletedKind, payload: stored + key)],
                stored.withUnsafeBytes { readBigEndian($0) }
            )
        }
        forget(user)
        return number
    }

    /// Forgets the number this process remembers for `user`: the next use reads the registry.
    func forget(_ user: UserID) {
        _ = known.withLock { $0.removeValue(forKey: user) }
    }

    /// The record ID that stands for user `number` (`_user<number>`, what
    /// `currentUserRecordID()` returns).
    static func recordID(ofNumber number: UInt64) -> Record.ID {
        Record.ID(recordName: "_user\(number)", zoneID: .default)
    }

    /// The user who owns zones named with `ownerName` (`_user<N>`, written as
    /// `currentUserRecordID()` writes it), or `nil` for any other name.
    func owner(named ownerName: String) throws -> (user: UserID, number: UInt64)? {
        guard ownerName.hasPrefix("_user"), let number = UInt64(ownerName.dropFirst(5)),
            "_user\(number)" == ownerName, let user = try user(number: number)
        else { return nil }
        return (user, number)
    }

    /// `user` (registered if new) as a share actor.
    func actor(_ user: UserID) throws -> ShareActor {
        let number = try number(of: user)
        return ShareActor(user: user, number: number, recordID: Self.recordID(ofNumber: number))
    }

    /// The user with this e-mail address (compared without case), or `nil`.
    func number(ofEmail email: String) throws -> UInt64? {
        try log.read { index in
            try index.value(forKey: Self.emailKey(email), in: "byEmail").map {
                $0.withUnsafeBytes { readBigEndian($0) }
            }
        }
    }

    /// The e-mail address of user `number`, if one was set.
    func email(ofNumber number: UInt64) throws -> String? {
        try log.read { index in
            try index.value(forKey: bigEndian(number), in: "emailOf").map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// Gives `user` (registered if new) the e-mail address `email`.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for an invalid address, or one another user has.
    func setEmail(_ email: String, of user: UserID) throws {
        try UserIdentity.validate(emailAddress: email)
        let number = try self.number(of: user)
        _ = try log.write { index -> (entries: [NewEntry], result: Void) in
            if let holder = try index.value(forKey: Self.emailKey(email), in: "byEmail"),
                holder.withUnsafeBytes({ readBigEndian($0) }) != number
            {
                throw SyncError(
                    .invalidArguments, "the e-mail address \(quotedEmail(email)) already belongs to another user")
            }
            let current = try index.value(forKey: bigEndian(number), in: "emailOf")
            if current == Array(email.utf8) { return ([], ()) }
            return ([NewEntry(kind: Self.userEmailSetKind, payload: bigEndian(number) + Array(email.utf8))], ())
        }
    }

    /// The key of the `schema` table whose value is the offset of the latest deployment.
    static let deployedSchemaKey = Array("deployed".utf8)

    /// The production schema deployed last, and the offset of its entry; `nil` while the server
    /// is in development mode (F137).
    func deployedSchema() throws -> (schema: RecordSchema, offset: LogOffset)? {
        try log.read { index in try Self.deployedSchema(index) }
    }

    static func deployedSchema(_ index: any IndexReader) throws -> (schema: RecordSchema, offset: LogOffset)? {
        guard let bytes = try index.value(forKey: deployedSchemaKey, in: "schema") else { return nil }
        let offset = LogOffset(bytes.withUnsafeBytes { readBigEndian($0) })
        guard let entry = try index.entry(at: offset), case .schemaDeployed(let schema) = try ServerEntry(entry) else {
            throw LogStoreError(
                .projectionInconsistent,
                "the registry's schema index points at offset \(offset.rawValue), which deploys no schema")
        }
        return (schema, offset)
    }

    /// Deploys `schema`: adds it to the one deployed before (if any) and appends the result as one
    /// `schemaDeployed` entry, unless it adds nothing to it. Returns the schema now deployed, its
    /// entry's offset, and whether this call appended it.
    ///
    /// - Throws: `SyncError(.invalidArguments)` naming the type and field when a field would hold
    ///   another kind of value than the deployed schema gives it; nothing is written.
    func deploy(_ schema: RecordSchema) throws -> (schema: RecordSchema, offset: LogOffset, appended: Bool) {
        let ((deployed, previous), offsets) = try log.write {
            index -> (entries: [NewEntry], result: (RecordSchema, LogOffset?)) in
            let current = try Self.deployedSchema(index)
            let merged = try (current?.schema ?? RecordSchema()).adding(schema)
            if let current, merged == current.schema { return ([], (merged, current.offset)) }
            return ([ServerEntry.schemaDeployed(merged).decodedNewEntry], (merged, nil))
        }
        if let previous { return (deployed, previous, false) }
        return (deployed, offsets.lowerBound, true)
    }

    /// The key of an e-mail address: addresses are compared without case.
    static func emailKey(_ email: String) -> [UInt8] { Array(email.lowercased().utf8) }

    private func quotedEmail(_ email: String) -> String { "\"\(email)\"" }
}
