import Foundation
import SyncModel
import Synchronization

/// What a check holds while it runs: the database factory, its users' prefix, and the failures
/// found so far.
final class ContractProbe: Sendable {
    let check: ContractCheck
    private let makeDatabase: ContractSuite.MakeDatabase
    /// Put before every user name, so that no two runs share a user.
    private let prefix: String
    private let found = Mutex<[ContractCheckFailure]>([])

    init(check: ContractCheck, makeDatabase: @escaping ContractSuite.MakeDatabase) {
        self.check = check
        self.makeDatabase = makeDatabase
        self.prefix = "contract-\(UUID().uuidString.prefix(8).lowercased())-"
    }

    var failures: [ContractCheckFailure] { found.withLock { $0 } }

    /// The device `device` of the user the check calls `user`, on the database of `scope`.
    func device(_ user: String, _ device: DeviceID, scope: DatabaseScope = .private) async throws -> ContractDevice {
        let database = try await makeDatabase(ContractUser(name: prefix + user), scope, device)
        return ContractDevice(database: database, probe: self)
    }

    /// Alice's phone and laptop on her private database, the phone having created `zone` first.
    func phoneAndLaptop(zone: String) async throws -> (phone: ContractDevice, laptop: ContractDevice) {
        let phone = try await device("alice", "phone")
        try await phone.createZone(zone)
        return (phone, try await device("alice", "laptop"))
    }

    func record(_ message: String, fileID: StaticString, line: UInt) {
        let failure = ContractCheckFailure(check: check.id, message: message, fileID: "\(fileID)", line: Int(line))
        found.withLock { $0.append(failure) }
    }

    /// Records a failure unless `condition` holds.
    func expect(
        _ condition: Bool, _ message: @autoclosure () -> String, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        if !condition { record(message(), fileID: fileID, line: line) }
    }

    /// `actual`, after recording a failure unless it equals `expected`.
    func expect<Value: Equatable>(
        _ actual: Value, equals expected: Value, _ what: String, fileID: StaticString = #fileID, line: UInt = #line
    ) {
        expect(actual == expected, "\(what): expected \(expected), got \(actual)", fileID: fileID, line: line)
    }

    /// The value of a per-item success; records a failure and throws it otherwise.
    @discardableResult
    func require<Value>(
        _ result: Result<Value, SyncError>?, _ what: String, fileID: StaticString = #fileID, line: UInt = #line
    ) throws -> Value {
        if case .success(let value)? = result { return value }
        let message = result.map { "\(what) failed: \($0)" } ?? "the response has no entry for \(what)"
        record(message, fileID: fileID, line: line)
        throw ContractCheckFailure(check: check.id, message: message, fileID: "\(fileID)", line: Int(line))
    }

    /// The error of a per-item failure with `code`; records a failure otherwise.
    @discardableResult
    func expectFailure<Value>(
        _ result: Result<Value, SyncError>?, _ code: SyncError.Code, _ what: String,
        fileID: StaticString = #fileID, line: UInt = #line
    ) -> SyncError? {
        guard case .failure(let error)? = result else {
            record("\(what): expected \(code), got \(result.map { "\($0)" } ?? "no entry")", fileID: fileID, line: line)
            return nil
        }
        expect(error.code == code, "\(what): expected \(code), got \(error)", fileID: fileID, line: line)
        return error
    }

    /// Records a failure unless `body` throws a `SyncError` with `code` (a whole-request failure).
    func expectThrows(
        _ code: SyncError.Code, _ what: String, fileID: StaticString = #fileID, line: UInt = #line,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            record("\(what): expected \(code), got no error", fileID: fileID, line: line)
        } catch let error as SyncError {
            expect(error.code == code, "\(what): expected \(code), got \(error)", fileID: fileID, line: line)
        } catch {
            record("\(what): expected SyncError \(code), got \(error)", fileID: fileID, line: line)
        }
    }
}

/// One device's view of one database, with the steps the checks take.
struct ContractDevice: Sendable {
    let database: any CloudDatabase
    let probe: ContractProbe

    /// Saves the zone `name`, which must succeed; returns the zone as the server holds it.
    @discardableResult
    func createZone(_ name: String, fileID: StaticString = #fileID, line: UInt = #line) async throws -> RecordZone {
        let zone = RecordZone(zoneName: name)
        let response = try await database.modifyZones(saving: [zone], deleting: [])
        return try probe.require(response.saveResults[zone.zoneID], "saving \(zone.zoneID)", fileID: fileID, line: line)
    }

    /// The outcome of saving the zone `zoneID`.
    func attemptCreateZone(_ zoneID: RecordZone.ID) async throws -> Result<RecordZone, SyncError>? {
        try await database.modifyZones(saving: [RecordZone(zoneID: zoneID)], deleting: []).saveResults[zoneID]
    }

    /// The outcome of deleting the zone `zoneID`.
    func attemptDeleteZone(_ zoneID: RecordZone.ID) async throws -> Result<Void, SyncError>? {
        try await database.modifyZones(saving: [], deleting: [zoneID]).deleteResults[zoneID]
    }

    /// Saves one record, which must succeed; returns the record as the server now holds it.
    @discardableResult
    func save(_ record: Record, fileID: StaticString = #fileID, line: UInt = #line) async throws -> Record {
        try probe.require(try await attemptSave(record), "saving \(record.recordID)", fileID: fileID, line: line)
    }

    /// The outcome of saving one record, with `savePolicy`.
    func attemptSave(
        _ record: Record, savePolicy: SavePolicy = .ifServerRecordUnchanged
    ) async throws -> Result<Record, SyncError>? {
        try await database.modifyRecords(saving: [record], deleting: [], savePolicy: savePolicy).saveResults[
            record.recordID]
    }

    /// The outcome of deleting one record.
    func attemptDelete(_ id: Record.ID) async throws -> Result<Void, SyncError>? {
        try await database.modifyRecords(saving: [], deleting: [id]).deleteResults[id]
    }

    /// The zone's records now, read from its whole change feed page by page.
    func zoneRecords(_ zoneID: RecordZone.ID) async throws -> [Record.ID: Record] {
        try await zoneFeed(zoneID).records
    }

    /// The zone's change feed from `since` (its start when `nil`), read page by page.
    func zoneFeed(_ zoneID: RecordZone.ID, since: ZoneChangeToken? = nil) async throws -> ZoneFeed {
        var feed = ZoneFeed(token: since)
        for _ in 0..<ContractDevice.maxPages {
            let page = try await database.fetchZoneChanges(zoneID: zoneID, since: feed.token)
            for modification in page.modifications { feed.records[modification.record.recordID] = modification.record }
            for deletion in page.deletions { feed.records[deletion.recordID] = nil }
            feed.changedIDs += page.modifications.map(\.record.recordID) + page.deletions.map(\.recordID)
            feed.token = page.changeToken
            if !page.moreComing { return feed }
        }
        probe.record("the feed of \(zoneID) kept saying moreComing", fileID: #fileID, line: #line)
        return feed
    }

    /// The zones the database's change feed reports as there (modified, not deleted after),
    /// read page by page from the start.
    func changedZones() async throws -> Set<RecordZone.ID> {
        var zones: Set<RecordZone.ID> = []
        var token: DatabaseChangeToken?
        for _ in 0..<ContractDevice.maxPages {
            let page = try await database.fetchDatabaseChanges(since: token)
            zones.formUnion(page.modifications.map(\.zoneID))
            zones.subtract(page.deletions.map(\.zoneID))
            token = page.changeToken
            if !page.moreComing { return zones }
        }
        probe.record("the database feed kept saying moreComing", fileID: #fileID, line: #line)
        return zones
    }

    /// A feed that pages more often than this is taken to loop forever.
    static let maxPages = 1_000
}

/// What a read of a zone's change feed gave.
struct ZoneFeed {
    /// Where the read ended.
    var token: ZoneChangeToken?
    /// The records modified and not deleted after, in their latest state.
    var records: [Record.ID: Record] = [:]
    /// Every record modified or deleted, in the feed's order.
    var changedIDs: [Record.ID] = []
}

/// A record never saved, of type `Note`, with string fields.
func note(_ name: String, in zone: String = "Notes", _ fields: [String: String] = [:]) -> Record {
    var record = Record(
        recordType: "Note", recordID: Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: zone)))
    for (key, value) in fields { record[key] = .string(value) }
    return record
}
