import Foundation
import LogStore
import SyncModel

/// The sessions' log: its entries and the index they build.
extension SessionStore {
    /// Payload: a ``Record`` (JSON): a device signed in.
    package static let createdKind: EntryKind = 130
    /// Payload: the session's ``Record`` after the refresh (JSON): its tokens were replaced.
    package static let refreshedKind: EntryKind = 131
    /// Payload: the session's ID (UTF-8): the session was revoked.
    package static let revokedKind: EntryKind = 132

    /// A session and the digests of its current tokens, as the log and its index keep it.
    struct Record: Codable, Sendable, Hashable {
        var session: Session
        /// The digest of the current access token (`sha256:…`).
        var access: String
        /// The digest of the current refresh token.
        var refresh: String
    }

    static func encode(_ record: Record) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = .sortedKeys
        return Array(try encoder.encode(record))
    }

    static func decode(_ bytes: [UInt8], offset: LogOffset? = nil) throws -> Record {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        do {
            return try decoder.decode(Record.self, from: Data(bytes))
        } catch {
            throw LogStoreError(.corruptEntry, "a session that does not decode: \(error)", offset: offset)
        }
    }

    /// The key of a session in `byUser`: the user ID, a zero byte (user IDs hold no control
    /// character), the session's ID.
    static func userKey(_ user: UserID, _ id: String = "") -> [UInt8] {
        Array(user.rawValue.utf8) + [0] + Array(id.utf8)
    }

    /// The key of a replaced refresh token in `usedOf`: the session's ID, a zero byte, the digest.
    static func usedKey(_ id: String, _ digest: String = "") -> [UInt8] {
        Array(id.utf8) + [0] + Array(digest.utf8)
    }

    static func record(id: String, in index: any IndexReader) throws -> Record? {
        try index.value(forKey: Array(id.utf8), in: "byID").map { try decode($0) }
    }

    /// The records of `user`'s sessions, in the order of their IDs.
    static func sessions(of user: UserID, in index: any IndexReader) throws -> [Record] {
        let prefix = userKey(user)
        // A key is at most 511 bytes: a user whose ID leaves no room for a session's ID has none.
        guard prefix.count + 32 <= 511 else { return [] }
        var ids: [String] = []
        try index.forEach(in: "byUser", from: prefix) { key, _ in
            guard key.starts(with: prefix) else { return false }
            ids.append(String(decoding: key.dropFirst(prefix.count), as: UTF8.self))
            return true
        }
        return try ids.compactMap { try record(id: $0, in: index) }
    }

    /// The sessions' index: `byID` (session ID → ``Record``), `access` and `refresh` (a current
    /// token's digest → session ID), `used` (a replaced refresh token's digest → session ID),
    /// `usedOf` (session ID, 0, digest → nothing: what to delete with the session), `byUser`
    /// (user ID, 0, session ID → nothing). A revoked session leaves no row.
    struct Index: Projection {
        let name = "sessions"
        let tableNames = ["byID", "access", "refresh", "used", "usedOf", "byUser"]

        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            switch entry.kind {
            case SessionStore.createdKind:
                let record = try SessionStore.decode(entry.payload, offset: entry.offset)
                let id = Array(record.session.id.utf8)
                try tables.put(entry.payload, forKey: id, in: "byID")
                try tables.put(id, forKey: Array(record.access.utf8), in: "access")
                try tables.put(id, forKey: Array(record.refresh.utf8), in: "refresh")
                try tables.put([], forKey: SessionStore.userKey(record.session.user, record.session.id), in: "byUser")
            case SessionStore.refreshedKind:
                let record = try SessionStore.decode(entry.payload, offset: entry.offset)
                let id = Array(record.session.id.utf8)
                guard let old = try tables.value(forKey: id, in: "byID") else {
                    throw LogStoreError(.corruptEntry, "a refresh of an unknown session", offset: entry.offset)
                }
                let previous = try SessionStore.decode(old, offset: entry.offset)
                _ = try tables.removeValue(forKey: Array(previous.access.utf8), in: "access")
                _ = try tables.removeValue(forKey: Array(previous.refresh.utf8), in: "refresh")
                try tables.put(id, forKey: Array(previous.refresh.utf8), in: "used")
                try tables.put([], forKey: SessionStore.usedKey(record.session.id, previous.refresh), in: "usedOf")
                try tables.put(entry.payload, forKey: id, in: "byID")
                try tables.put(id, forKey: Array(record.access.utf8), in: "access")
                try tables.put(id, forKey: Array(record.refresh.utf8), in: "refresh")
            case SessionStore.revokedKind:
                let id = String(decoding: entry.payload, as: UTF8.self)
                guard let old = try tables.value(forKey: entry.payload, in: "byID") else { return }
                let record = try SessionStore.decode(old, offset: entry.offset)
                _ = try tables.removeValue(forKey: Array(record.access.utf8), in: "access")
                _ = try tables.removeValue(forKey: Array(record.refresh.utf8), in: "refresh")
                _ = try tables.removeValue(forKey: SessionStore.userKey(record.session.user, id), in: "byUser")
                _ = try tables.removeValue(forKey: entry.payload, in: "byID")
                let prefix = SessionStore.usedKey(id)
                var used: [[UInt8]] = []
                try tables.forEach(in: "usedOf", from: prefix) { key, _ in
                    guard key.starts(with: prefix) else { return false }
                    used.append(Array(key))
                    return true
                }
                for key in used {
                    _ = try tables.removeValue(forKey: key, in: "usedOf")
                    _ = try tables.removeValue(forKey: Array(key.dropFirst(prefix.count)), in: "used")
                }
            default:
                throw LogStoreError(.corruptEntry, "kind \(entry.kind) is not a sessions entry", offset: entry.offset)
            }
        }
    }
}
