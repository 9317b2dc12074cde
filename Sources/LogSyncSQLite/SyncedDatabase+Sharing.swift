import Foundation
import GRDB
import LogSync

/// Sharing a row and the rows below it (a hierarchy share, F123), and accepting shares.
extension SyncedDatabase {
    /// The ID of the share rooted at a row: the row's record name and `#share`, which no row's
    /// name (`primaryKey:table`) can be, whatever its key.
    func shareID(rootedAt root: Record.ID) -> Record.ID {
        Record.ID(recordName: root.recordName + Self.shareSuffix, zoneID: root.zoneID)
    }

    static let shareSuffix = "#share"

    /// Whether a record is the share of a row (``share(table:primaryKey:with:removing:title:)``).
    public func isShare(_ id: SyncModel.Record.ID) -> Bool { id.recordName.hasSuffix(Self.shareSuffix) }

    /// The table and primary key of the row a record is, or `nil` for a share or a record of a
    /// type no table declares.
    public func row(of id: SyncModel.Record.ID) -> (table: String, primaryKey: String)? {
        guard let (key, table) = TableSchema.split(id.recordName), schemas[table] != nil else { return nil }
        return (table, key)
    }

    /// The record ID of a synced row.
    public func recordID(table: String, primaryKey: String) throws -> SyncModel.Record.ID {
        guard let schema = schemas[table] else { throw SyncedDatabaseError.unknownTable(table) }
        try handOff()
        guard let place = try writer.read({ db in try place(of: table, schema.keyValue(primaryKey), db) }) else {
            throw SyncedDatabaseError.noSuchRow(table: table, primaryKey: primaryKey)
        }
        return place.recordID(schema.recordName(primaryKey))
    }

    /// Shares the row `primaryKey` of `table` and every row below it (through the tables'
    /// `parent` columns) with `participants`, or changes the participants of its share: the
    /// share is saved with the next send. Rows added below it later are shared too.
    ///
    /// - Throws: ``SyncedDatabaseError/noSuchRow(table:primaryKey:)`` if there is no such row.
    public func share(
        table: String, primaryKey: String, with participants: [Share.Participant], removing: [UserIdentity] = [],
        title: String? = nil
    ) throws {
        let root = try recordID(table: table, primaryKey: primaryKey)
        let id = shareID(rootedAt: root)
        let engine = root.zoneID.ownerName == RecordZone.ID.defaultOwnerName ? privateEngine : sharedEngine
        guard let engine else { throw SyncedDatabaseError.noSharedDatabase }
        var share =
            try writer.read { db in try shareRecord(id, db) }.flatMap { try? Share(record: $0) }
            ?? Share(rootRecordID: root, shareID: id)
        for participant in participants { share.addParticipant(participant) }
        for identity in removing { share.removeParticipant(identity) }
        if let title { share.title = title }
        let record = share.record
        try writer.write { db in try keepShare(record, shared: engine === sharedEngine, db) }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// The share rooted at a row, as the server last saved it (its URL, participants and their
    /// acceptance); `nil` before it is saved.
    public func share(table: String, primaryKey: String) throws -> Share? {
        let id = shareID(rootedAt: try recordID(table: table, primaryKey: primaryKey))
        return try writer.read { db in try shareRecord(id, db) }.flatMap { try? Share(record: $0) }
    }

    /// Stops sharing a row: the share is deleted with the next send.
    public func stopSharing(table: String, primaryKey: String) throws {
        let id = shareID(rootedAt: try recordID(table: table, primaryKey: primaryKey))
        try writer.write { db in try forget(id, in: .shares, db) }
        try privateEngine.state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
    }

    /// Accepts a share another user sent (its URL), then fetches: its rows arrive in the same
    /// tables, in the shared database, and edits of them and rows added below them go back to
    /// the owner's zone.
    public func acceptShare(url: URL) async throws {
        guard let sharedDatabase, let engine = sharedEngine else { throw SyncedDatabaseError.noSharedDatabase }
        let response = try await sharedDatabase.acceptShares(AcceptSharesRequest(shareURLs: [url]))
        if let result = response.results[url] { _ = try result.get() }
        try await engine.fetchChanges()
    }

    /// A share record the store keeps (saved here or fetched).
    func shareRecord(_ id: Record.ID, _ db: Database) throws -> Record? {
        try Data.fetchOne(
            db.cachedStatement(sql: "SELECT record FROM logsync_shares WHERE name = ? AND zone = ? AND owner = ?"),
            arguments: [id.recordName, id.zoneID.zoneName, id.zoneID.ownerName]
        ).map { try JSONDecoder().decode(Record.self, from: $0) }
    }
}
