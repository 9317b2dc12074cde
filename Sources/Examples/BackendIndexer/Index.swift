import Foundation
import LogSyncHTTP
import SyncModel

/// One record as `index.json` keeps it.
struct IndexedRecord: Codable, Hashable {
    var user: String
    var scope: String
    var zoneName: String
    var ownerName: String
    var recordName: String
    var recordType: String
    var fields: [String: RecordValue]

    var key: String { Index.key(user, scope, zoneName, ownerName, recordName) }
}

/// What `tokens.json` keeps: the change token of each database and zone read, in base64.
struct SavedTokens: Codable {
    var databases: [String: String] = [:]
    var zones: [String: String] = [:]
}

/// The index and tokens in the state directory, written index first, each atomically.
final class Index {
    let directory: URL
    private var records: [String: IndexedRecord] = [:]
    private var tokens = SavedTokens()

    var indexFile: URL { directory.appendingPathComponent("index.json") }
    var tokensFile: URL { directory.appendingPathComponent("tokens.json") }
    var recordCount: Int { records.count }

    init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        if let data = try? Data(contentsOf: indexFile) {
            for record in try JSONDecoder().decode([IndexedRecord].self, from: data) { records[record.key] = record }
        }
        if let data = try? Data(contentsOf: tokensFile) {
            tokens = try JSONDecoder().decode(SavedTokens.self, from: data)
        }
    }

    static func key(_ parts: String...) -> String { parts.joined(separator: "\u{1}") }

    static func databaseKey(_ user: String, _ scope: DatabaseScope) -> String { key(user, "\(scope)") }

    static func zoneKey(_ user: String, _ scope: DatabaseScope, _ zone: RecordZone.ID) -> String {
        key(user, "\(scope)", zone.zoneName, zone.ownerName)
    }

    /// The saved token of a database, as bytes.
    func token(of user: String, _ scope: DatabaseScope) -> Data? {
        tokens.databases[Self.databaseKey(user, scope)].flatMap { Data(base64Encoded: $0) }
    }

    /// Reads everything new in `user`'s database of `scope`, then saves the index and the tokens.
    func read(
        _ user: String, _ scope: DatabaseScope, from admin: AdminClient
    ) async throws -> (saved: Int, deleted: Int) {
        var saved = 0
        var deleted = 0
        let databaseKey = Self.databaseKey(user, scope)
        var databaseToken = try tokens.databases[databaseKey].flatMap { Data(base64Encoded: $0) }.map {
            try DatabaseChangeToken(data: $0)
        }
        var changedZones: [RecordZone.ID] = []
        while true {
            let since = databaseToken
            let response: FetchDatabaseChangesResponse
            switch await Self.attempt({ () async throws(SyncError) in
                try await admin.fetchDatabaseChanges(
                    user: user, scope: scope, FetchDatabaseChangesRequest(since: since))
            }) {
            case .success(let page): response = page
            case .failure(let error) where error.code == .changeTokenExpired && since != nil:
                // Compacted: read every zone again from the start.
                databaseToken = nil
                for key in tokens.zones.keys where key.hasPrefix(databaseKey + "\u{1}") { tokens.zones[key] = nil }
                continue
            case .failure(let error): throw error
            }
            // Deletions first: a zone both deleted and modified was deleted, then made again.
            for deletion in response.deletions {
                deleted += dropZone(user, scope, deletion.zoneID)
            }
            for modification in response.modifications where !changedZones.contains(modification.zoneID) {
                changedZones.append(modification.zoneID)
            }
            databaseToken = response.changeToken
            if !response.moreComing { break }
        }
        for zoneID in changedZones {
            let zoneKey = Self.zoneKey(user, scope, zoneID)
            var zoneToken = try tokens.zones[zoneKey].flatMap { Data(base64Encoded: $0) }.map {
                try ZoneChangeToken(data: $0)
            }
            pages: while true {
                let since = zoneToken
                let response: FetchZoneChangesResponse
                switch await Self.attempt({ () async throws(SyncError) in
                    try await admin.fetchZoneChanges(
                        user: user, scope: scope, FetchZoneChangesRequest(zoneID: zoneID, since: since))
                }) {
                case .success(let page): response = page
                case .failure(let error) where error.code == .changeTokenExpired && since != nil:
                    deleted += dropZone(user, scope, zoneID)
                    zoneToken = nil
                    continue
                case .failure(let error) where error.code == .zoneNotFound || error.code == .userDeletedZone:
                    // Deleted after the database feed was read: its records go with it.
                    deleted += dropZone(user, scope, zoneID)
                    zoneToken = nil
                    break pages
                case .failure(let error): throw error
                }
                for deletion in response.deletions {
                    let key = Self.key(
                        user, "\(scope)", zoneID.zoneName, zoneID.ownerName, deletion.recordID.recordName)
                    if records.removeValue(forKey: key) != nil { deleted += 1 }
                }
                for modification in response.modifications {
                    let record = modification.record
                    var fields: [String: RecordValue] = [:]
                    for key in record.allKeys() { fields[key] = record[key] }
                    let indexed = IndexedRecord(
                        user: user, scope: "\(scope)", zoneName: zoneID.zoneName, ownerName: zoneID.ownerName,
                        recordName: record.recordID.recordName, recordType: record.recordType,
                        fields: fields)
                    records[indexed.key] = indexed
                    saved += 1
                }
                zoneToken = response.changeToken
                if !response.moreComing { break }
            }
            tokens.zones[zoneKey] = zoneToken?.data.base64EncodedString()
        }
        tokens.databases[databaseKey] = databaseToken?.data.base64EncodedString()
        // The records first: tokens are never ahead of the index they describe.
        try write(records.values.sorted { $0.key < $1.key }, to: indexFile)
        try write(tokens, to: tokensFile)
        return (saved, deleted)
    }

    /// What `body` returns or throws.
    static func attempt<T>(_ body: () async throws(SyncError) -> T) async -> Result<T, SyncError> {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }

    /// Drops every record of a zone and its token; returns how many records went.
    private func dropZone(_ user: String, _ scope: DatabaseScope, _ zoneID: RecordZone.ID) -> Int {
        let prefix = Self.zoneKey(user, scope, zoneID) + "\u{1}"
        let gone = records.keys.filter { $0.hasPrefix(prefix) }
        for key in gone { records[key] = nil }
        tokens.zones[Self.zoneKey(user, scope, zoneID)] = nil
        return gone.count
    }

    /// Writes `value` as JSON to a temporary file, flushed to disk, then renamed over `file`.
    private func write(_ value: some Encodable, to file: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data = try encoder.encode(value)
        let temporary = directory.appendingPathComponent(".\(file.lastPathComponent).tmp")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary.path])
        }
        let handle = try FileHandle(forWritingTo: temporary)
        try handle.write(contentsOf: data)
        try handle.synchronize()
        try handle.close()
        if rename(temporary.path, file.path) != 0 {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
        }
    }
}
