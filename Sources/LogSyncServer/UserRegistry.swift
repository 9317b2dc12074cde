import Foundation
import LogStore
import Synchronization
import SyncModel

/// The server's users: each user ID gets a number, the offset of its registration in the
/// registry's log. The number names the user's data directory and user record, so user IDs of
/// any form (e-mail addresses, account URLs) are safe on disk and never collide.
package final class UserRegistry: Sendable {
    package static let userRegisteredKind: EntryKind = 120

    /// user ID (UTF-8) → its number, as a projection of the registry log.
    struct Index: Projection {
        let name = "users"
        let tableNames = ["byID"]
        func apply(_ entry: LogEntry, to tables: ProjectionTables) throws {
            guard entry.kind == UserRegistry.userRegisteredKind else {
                throw LogStoreError(.corruptEntry, "kind \(entry.kind) is not a registry entry", offset: entry.offset)
            }
            try tables.put(bigEndian(entry.offset.rawValue), forKey: entry.payload, in: "byID")
        }
    }

    let log: Log
    private let known = Mutex<[UserID: UInt64]>([:])

    init(directory: URL, durability: Durability) throws {
        log = try Log.open(
            at: directory.appendingPathComponent("registry", isDirectory: true), named: "users",
            options: .init(durability: durability), projections: [Index()])
    }

    /// The number of `user`, registering the user on first sight.
    ///
    /// - Throws: `SyncError(.invalidArguments)` for a user ID that breaks the rules of
    ///   `Identifier.userID` (empty, over 511 bytes, a control character…).
    func number(of user: UserID) throws -> UInt64 {
        if let number = known.withLock({ $0[user] }) { return number }
        try user.validate()
        let key = Array(user.rawValue.utf8)
        let number = try log.environment.write { transaction -> UInt64 in
            let reader = LogReader(log: log, transaction: transaction)
            if let stored = try transaction.value(forKey: key, in: reader.table("byID", of: "users")) {
                return stored.withUnsafeBytes { readBigEndian($0) }
            }
            return try log.append([NewEntry(kind: Self.userRegisteredKind, payload: key)], in: transaction).lowerBound.rawValue
        }
        known.withLock { $0[user] = number }
        return number
    }
}
