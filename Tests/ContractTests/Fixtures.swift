import Foundation
import LogSyncServer
import SyncModel
import Synchronization
import TemporaryDirectory
import Testing

// The fixture language of the contract suite: a test reads as a timeline of devices.
//
//     try await withServer(harness) { server in
//         let phone = try await server.device("alice", "phone")
//         try await phone.createZone("Notes")
//         let saved = try await phone.save(newRecord("n1", ["title": "Groceries"]))
//         let laptop = try await server.device("alice", "laptop")
//         #expect(try await laptop.fetchZone("Notes").records[saved.recordID]?["title"] == "Groceries")
//     }

// MARK: - Servers

/// Starts a fresh server of `harness` in a temporary directory of its own, runs `body`, then
/// stops the server and removes the directory (also when `body` throws).
func withServer(
    _ harness: any ContractHarness, clock: ManualClock = ManualClock(),
    _ body: (TestServer) async throws -> Void
) async throws {
    try await withTemporaryDirectory { directory in
        let server = try await harness.start(in: directory, now: clock.closure)
        do {
            try await body(TestServer(server: server, clock: clock))
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }
}

/// ``withServer(_:clock:_:)`` with alice's phone; with `zone`, the phone creates that zone
/// before `body` runs.
func withPhone(
    _ harness: any ContractHarness, clock: ManualClock = ManualClock(), zone: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (TestServer, Device) async throws -> Void
) async throws {
    try await withServer(harness, clock: clock) { server in
        let phone = try await server.device("alice", "phone")
        if let zone { try await phone.createZone(zone, sourceLocation: sourceLocation) }
        try await body(server, phone)
    }
}

/// ``withPhone(_:clock:zone:sourceLocation:_:)`` with bob registered (bob@example.com) and his
/// phone on his shared database: an owner and the user she shares with.
func withAliceAndBob(
    _ harness: any ContractHarness, zone: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (TestServer, _ alice: Device, _ bob: Device) async throws -> Void
) async throws {
    try await withPhone(harness, zone: zone, sourceLocation: sourceLocation) { server, alice in
        try server.admin.registerUser("bob", emailAddress: "bob@example.com")
        try await body(server, alice, try await server.device("bob", "phone", scope: .shared))
    }
}

/// ``withServer(_:clock:_:)`` with alice's phone and laptop; with `zone`, the phone creates that
/// zone before `body` runs.
func withPhoneAndLaptop(
    _ harness: any ContractHarness, clock: ManualClock = ManualClock(), zone: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (TestServer, Device, Device) async throws -> Void
) async throws {
    try await withServer(harness, clock: clock) { server in
        let phone = try await server.device("alice", "phone")
        let laptop = try await server.device("alice", "laptop")
        if let zone { try await phone.createZone(zone, sourceLocation: sourceLocation) }
        try await body(server, phone, laptop)
    }
}

/// A running server, its clock and its admin hooks, as a test holds them.
struct TestServer: Sendable {
    let server: any ContractServer
    /// The server's wall clock.
    let clock: ManualClock

    /// The server-side hooks.
    var admin: ServerAdmin { server.admin }

    /// A device of `user` looking at the database of `scope`.
    func device(_ user: UserID, _ device: DeviceID, scope: DatabaseScope = .private) async throws -> Device {
        let database = try await server.database(user: user, scope: scope, device: device)
        return Device(
            user: user, id: device, database: database,
            pushReady: { [server] in await server.pushChannelsReady(database) })
    }

    /// The current change token of `user`'s database: the end of its log.
    func currentToken(of user: UserID, scope: DatabaseScope = .private) throws -> DatabaseChangeToken {
        try admin.currentToken(of: user, scope: scope)
    }
}

// MARK: - IDs and records

/// The ID of the current user's zone `name`.
func zoneID(_ name: String) -> RecordZone.ID {
    RecordZone.ID(zoneName: name)
}

/// The ID of record `name` in the current user's zone `zone`.
func recordID(_ name: String, in zone: String = "Notes") -> Record.ID {
    Record.ID(recordName: name, zoneID: zoneID(zone))
}

/// A record that has never been saved, with `fields` set (so they are its changed keys).
func newRecord(
    _ name: String, in zone: String = "Notes", type: Record.RecordType = "Note", _ fields: [String: RecordValue] = [:]
) -> Record {
    newRecord(recordID(name, in: zone), type: type, fields)
}

/// A record that has never been saved, with `fields` set (so they are its changed keys).
func newRecord(_ id: Record.ID, type: Record.RecordType = "Note", _ fields: [String: RecordValue] = [:]) -> Record {
    var record = Record(recordType: type, recordID: id)
    for (key, value) in fields { record[key] = value }
    return record
}

/// A record whose only field `k` makes it exactly `size` bytes of field data (`size` ≥ 1).
func sizedRecord(_ name: String, in zone: String = "Notes", size: Int) -> Record {
    precondition(size >= 1, "a sized record holds at least its key")
    return newRecord(name, in: zone, type: "Blob", ["k": .bytes(Data(count: size - 1))])
}

extension Record {
    /// A copy with `fields` set (a `nil` value removes the field); the keys become changed keys.
    func setting(_ fields: [String: RecordValue?]) -> Record {
        var copy = self
        for (key, value) in fields { copy[key] = value }
        return copy
    }
}

// MARK: - Devices

/// One device's view of one database of one user.
struct Device: Sendable, CustomStringConvertible {
    let user: UserID
    let id: DeviceID
    let database: any CloudDatabase
    /// Returns once the device's push streams reach the server (see `ContractServer.pushChannelsReady`).
    var pushReady: @Sendable () async -> Void = {}
    /// Whether each record and zone write carries what an engine's send carries: a new request ID,
    /// an operation group and a client change token (F69, F160).
    var sendsLikeAnEngine = false

    /// A copy whose writes carry a request ID, an operation group and a client change token.
    func likeAnEngine() -> Device {
        var device = self
        device.sendsLikeAnEngine = true
        return device
    }

    /// Sends `request`, with a request ID, an operation group and a client change token of its
    /// own when the device sends like an engine.
    func send(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        var request = request
        if sendsLikeAnEngine {
            request.requestID = request.requestID ?? RequestID(rawValue: "\(id.rawValue)-\(UUID().uuidString)")
            request.operationGroup = request.operationGroup ?? OperationGroup(name: "attempt")
            request.clientChangeToken = request.clientChangeToken ?? Data(UUID().uuidString.utf8)
        }
        return try await database.modifyRecords(request)
    }

    /// Sends `request`, with an operation group of its own when the device sends like an engine.
    func send(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse {
        var request = request
        if sendsLikeAnEngine { request.operationGroup = request.operationGroup ?? OperationGroup(name: "attempt") }
        return try await database.modifyZones(request)
    }

    var description: String { "\(user)'s \(id) (\(database.databaseScope))" }

    // MARK: Zones

    /// Saves a zone, which must succeed; returns the zone as the server holds it.
    @discardableResult
    func createZone(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> RecordZone {
        let zone = RecordZone(zoneName: name)
        let response = try await send(ModifyZonesRequest(zonesToSave: [zone]))
        return try requireSuccess(
            response.saveResults[zone.zoneID], "saving \(zone.zoneID)", sourceLocation: sourceLocation)
    }

    /// Deletes a zone, which must succeed.
    func deleteZone(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let response = try await send(ModifyZonesRequest(zoneIDsToDelete: [zoneID(name)]))
        try requireSuccess(
            response.deleteResults[zoneID(name)], "deleting \(zoneID(name))", sourceLocation: sourceLocation)
    }

    /// The outcome of saving one zone.
    func attemptCreateZone(_ zoneID: RecordZone.ID) async throws -> Result<RecordZone, SyncError>? {
        try await send(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: zoneID)])).saveResults[zoneID]
    }

    /// The outcome of deleting one zone.
    func attemptDeleteZone(_ zoneID: RecordZone.ID) async throws -> Result<Void, SyncError>? {
        try await send(ModifyZonesRequest(zoneIDsToDelete: [zoneID])).deleteResults[zoneID]
    }

    // MARK: Assets

    /// Writes `content` to a file of its own and uploads it for the records of `zone`; returns
    /// the asset as a record field holds it (digest, size and that file).
    func uploadAsset(
        _ content: [UInt8], zone: RecordZone.ID = zoneID("Notes"), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Asset {
        let file = try AssetFiles.write(content)
        let digest = AssetHasher.digest(of: content)
        let response = try await database.uploadAsset(
            AssetUploadRequest(zoneID: zone, digest: digest, size: Int64(content.count), fileURL: file))
        #expect(response.asset.digest == digest, sourceLocation: sourceLocation)
        return Asset(digest: digest, size: Int64(content.count), fileURL: file)
    }

    /// Downloads an asset's content into a new file and returns its bytes.
    func downloadAsset(_ asset: Asset, zone: RecordZone.ID = zoneID("Notes")) async throws -> [UInt8] {
        let destination = AssetFiles.directory.appendingPathComponent(UUID().uuidString)
        let response = try await database.downloadAsset(
            AssetDownloadRequest(
                zoneID: zone, digest: try #require(asset.digest), size: try #require(asset.size),
                destination: destination))
        return Array(try Data(contentsOf: response.fileURL))
    }

    // MARK: Records

    /// Saves one record, which must succeed; returns the record as the server now holds it.
    @discardableResult
    func save(
        _ record: Record, savePolicy: SavePolicy = .ifServerRecordUnchanged,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Record {
        let result = try await attemptSave(record, savePolicy: savePolicy)
        return try requireSuccess(result, "saving \(record.recordID)", sourceLocation: sourceLocation)
    }

    /// Saves records in one request; every save must succeed. Returns the saved records by ID.
    @discardableResult
    func save(
        _ records: [Record], atomically: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Record.ID: Record] {
        let response = try await send(
            ModifyRecordsRequest(recordsToSave: records, recordIDsToDelete: [], atomically: atomically))
        var saved: [Record.ID: Record] = [:]
        for record in records {
            saved[record.recordID] = try requireSuccess(
                response.saveResults[record.recordID], "saving \(record.recordID)", sourceLocation: sourceLocation)
        }
        return saved
    }

    /// The outcome of saving one record.
    func attemptSave(
        _ record: Record, savePolicy: SavePolicy = .ifServerRecordUnchanged
    ) async throws -> Result<Record, SyncError>? {
        try await send(ModifyRecordsRequest(recordsToSave: [record], recordIDsToDelete: [], savePolicy: savePolicy))
            .saveResults[record.recordID]
    }

    /// Deletes records in one request; every deletion must succeed.
    func delete(_ ids: Record.ID..., sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let response = try await send(ModifyRecordsRequest(recordsToSave: [], recordIDsToDelete: ids))
        for id in ids {
            try requireSuccess(response.deleteResults[id], "deleting \(id)", sourceLocation: sourceLocation)
        }
    }

    /// Sends a whole modify request and returns the per-item outcomes.
    func modify(
        saving: [Record] = [], deleting: [Record.ID] = [], savePolicy: SavePolicy = .ifServerRecordUnchanged,
        atomically: Bool = true, requestID: RequestID? = nil, clientChangeToken: Data? = nil
    ) async throws -> ModifyRecordsResponse {
        try await send(
            ModifyRecordsRequest(
                recordsToSave: saving, recordIDsToDelete: deleting, savePolicy: savePolicy, atomically: atomically,
                requestID: requestID, clientChangeToken: clientChangeToken))
    }

    /// The record as the server holds it, read from a full fetch of its zone; `nil` if absent.
    func fetchRecord(_ id: Record.ID) async throws -> Record? {
        try await fetchZone(id.zoneID).records[id]
    }

    // MARK: Change feeds

    /// Fetches a zone's change feed page by page until `moreComing` is false.
    func fetchZone(
        _ zone: String, since: ZoneChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ZoneFetch {
        try await fetchZone(
            zoneID(zone), since: since, resultsLimit: resultsLimit, desiredKeys: desiredKeys,
            sourceLocation: sourceLocation)
    }

    /// Fetches a zone's change feed page by page until `moreComing` is false.
    func fetchZone(
        _ zoneID: RecordZone.ID, since: ZoneChangeToken? = nil, resultsLimit: Int? = nil,
        desiredKeys: [String]? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ZoneFetch {
        var fetch = ZoneFetch()
        var token = since
        while true {
            let page = try await database.fetchZoneChanges(
                zoneID: zoneID, since: token, resultsLimit: resultsLimit, desiredKeys: desiredKeys)
            #expect(page.zoneID == zoneID, "a page of \(zoneID) names \(page.zoneID)", sourceLocation: sourceLocation)
            fetch.apply(page)
            token = page.changeToken
            guard page.moreComing else { return fetch }
            try #require(
                fetch.pages.count < ZoneFetch.maxPages, "the zone feed kept saying moreComing",
                sourceLocation: sourceLocation)
        }
    }

    /// Fetches the database's change feed page by page until `moreComing` is false.
    func fetchDatabase(
        since: DatabaseChangeToken? = nil, resultsLimit: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> DatabaseFetch {
        var fetch = DatabaseFetch()
        var token = since
        while true {
            let page = try await database.fetchDatabaseChanges(since: token, resultsLimit: resultsLimit)
            fetch.apply(page)
            token = page.changeToken
            guard page.moreComing else { return fetch }
            try #require(
                fetch.pages.count < ZoneFetch.maxPages, "the database feed kept saying moreComing",
                sourceLocation: sourceLocation)
        }
    }

    /// Where a full fetch from nil ends now: the database's token and zone `zone`'s.
    func currentTokens(_ zone: String = "Notes") async throws -> (database: DatabaseChangeToken, zone: ZoneChangeToken)
    {
        (try await fetchDatabase().token, try await fetchZone(zone).token)
    }

    /// The device's database as `Operations` (a protocol its harness's databases adopt), or a
    /// ``ContractFailure`` saying it has no `what`.
    func operations<Operations>(_: Operations.Type, _ what: String) throws -> Operations {
        guard let operations = database as? Operations else { throw ContractFailure("\(database) has no \(what)") }
        return operations
    }

    // MARK: Subscriptions and push

    /// Saves a database subscription, which must succeed.
    func subscribe(_ id: Subscription.ID = "engine", sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let subscription = Subscription(subscriptionID: id, kind: .database)
        let response = try await database.modifySubscriptions(saving: [subscription], deleting: [])
        try requireSuccess(response.saveResults[id], "saving \(subscription)", sourceLocation: sourceLocation)
    }

    /// Starts listening to this device's push hints; returns once the listener waits for one.
    func listen() async -> HintListener {
        let listener = HintListener(database.pushHints())
        await listener.settle()
        await pushReady()
        return listener
    }
}

// MARK: - Fetch results

/// Everything one paged zone fetch returned, and the zone's contents it implies.
struct ZoneFetch {
    /// A fetch that pages more often than this is taken to loop forever.
    static let maxPages = 10_000

    /// The pages, in order.
    var pages: [FetchZoneChangesResponse] = []
    /// Records modified and not deleted afterwards, in their latest state.
    var records: [Record.ID: Record] = [:]
    /// Records deleted and not modified afterwards, with the type the feed gave.
    var deletions: [Record.ID: Record.RecordType] = [:]

    /// The token the last page ended at.
    var token: ZoneChangeToken { pages.last!.changeToken }
    /// Every modification of every page, in order (a record may repeat across pages).
    var modifiedIDs: [Record.ID] { pages.flatMap { $0.modifications.map(\.record.recordID) } }
    /// Every deletion of every page, in order.
    var deletedIDs: [Record.ID] { pages.flatMap { $0.deletions.map(\.recordID) } }
    /// The client change token of the last page.
    var clientChangeToken: Data? { pages.last?.clientChangeToken }

    mutating func apply(_ page: FetchZoneChangesResponse) {
        pages.append(page)
        for modification in page.modifications {
            records[modification.record.recordID] = modification.record
            deletions[modification.record.recordID] = nil
        }
        for deletion in page.deletions {
            records[deletion.recordID] = nil
            deletions[deletion.recordID] = deletion.recordType
        }
    }
}

/// Everything one paged database fetch returned.
struct DatabaseFetch {
    /// The pages, in order.
    var pages: [FetchDatabaseChangesResponse] = []
    /// Every zone reported modified on any page.
    var modified: Set<RecordZone.ID> = []
    /// Every zone reported deleted on any page, with the last reason given.
    var deleted: [RecordZone.ID: ZoneDeletionReason] = [:]
    /// Zones whose last report, reading the pages in order, is a modification.
    var netModified: Set<RecordZone.ID> = []
    /// Zones whose last report, reading the pages in order, is a deletion, with its reason.
    var netDeleted: [RecordZone.ID: ZoneDeletionReason] = [:]

    /// The token the last page ended at.
    var token: DatabaseChangeToken { pages.last!.changeToken }
    /// Whether no page reported anything.
    var isEmpty: Bool { modified.isEmpty && deleted.isEmpty }

    mutating func apply(_ page: FetchDatabaseChangesResponse) {
        pages.append(page)
        modified.formUnion(page.modifications.map(\.zoneID))
        for deletion in page.deletions { deleted[deletion.zoneID] = deletion.reason }
        for modification in page.modifications {
            netModified.insert(modification.zoneID)
            netDeleted[modification.zoneID] = nil
        }
        for deletion in page.deletions {
            netModified.remove(deletion.zoneID)
            netDeleted[deletion.zoneID] = deletion.reason
        }
    }
}

// MARK: - Push

/// A device's stream of push hints, read one at a time.
///
/// A server may keep only the newest undelivered hint (hints coalesce, F113), which would hide a
/// wrong hint behind a later right one. So a pump task drains the device's stream as hints
/// arrive into an unbounded queue the test reads, and ``settle()`` waits until the pump is
/// waiting for the server's next hint. A test that checks which commit a hint names settles
/// before each commit, so every hint the server sends reaches the queue.
final class HintListener {
    private var iterator: AsyncStream<PushHint>.Iterator
    private let pump: Task<Void, Never>
    private let state = PumpState()

    init(_ stream: AsyncStream<PushHint>) {
        let (queue, sink) = AsyncStream.makeStream(of: PushHint.self, bufferingPolicy: .unbounded)
        iterator = queue.makeAsyncIterator()
        pump = Task { [state] in
            var source = stream.makeAsyncIterator()
            while true {
                state.setWaiting(true)
                guard let hint = await source.next() else { break }
                state.setWaiting(false)
                sink.yield(hint)
            }
            state.finish()
            sink.finish()
        }
    }

    deinit { pump.cancel() }

    /// Returns once the pump waits for the server's next hint (or the stream has ended).
    func settle() async {
        await state.waitUntilWaiting()
    }

    /// The next hint; throws if the stream finishes (or the test is cancelled) first.
    func next() async throws -> PushHint {
        guard let hint = await iterator.next() else {
            throw ContractFailure("the push hint stream finished before a hint arrived")
        }
        return hint
    }

    /// The next hint, expected to be for `commit` in `zone` (see ``hint(_:isFor:in:sourceLocation:)``);
    /// `what` names the commit in the issue recorded otherwise.
    @discardableResult
    func expectNext(
        isFor commit: DatabaseChangeToken, in zone: String, _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> PushHint {
        let next = try await next()
        #expect(
            hint(next, isFor: commit, in: zoneID(zone), sourceLocation: sourceLocation),
            "the next hint, \(next), is not \(what)",
            sourceLocation: sourceLocation)
        return next
    }
}

/// Whether a ``HintListener``'s pump is waiting for the server, and who waits for that.
final class PumpState: Sendable {
    private struct State {
        var waiting = false
        var finished = false
        var settlers: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func setWaiting(_ waiting: Bool) {
        let settlers = state.withLock { state in
            state.waiting = waiting
            guard waiting else { return [CheckedContinuation<Void, Never>]() }
            defer { state.settlers = [] }
            return state.settlers
        }
        for settler in settlers { settler.resume() }
    }

    func finish() {
        let settlers = state.withLock { state in
            state.finished = true
            defer { state.settlers = [] }
            return state.settlers
        }
        for settler in settlers { settler.resume() }
    }

    func waitUntilWaiting() async {
        await withCheckedContinuation { (settler: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                if state.waiting || state.finished { return true }
                state.settlers.append(settler)
                return false
            }
            if ready { settler.resume() }
        }
    }
}

/// Whether `hint` is the hint of the commit that ended at `token` in `zone`, judged by what the
/// hint names (a hint may name a token, a zone, both or neither; F154).
///
/// Records an issue if the hint names neither, since then no test can tell commits apart.
func hint(
    _ hint: PushHint, isFor token: DatabaseChangeToken, in zone: RecordZone.ID,
    sourceLocation: SourceLocation = #_sourceLocation
) -> Bool {
    if hint.changeToken == nil && hint.zoneID == nil {
        Issue.record(
            "\(hint) names neither a change token nor a zone, so it cannot be told apart from other hints",
            sourceLocation: sourceLocation)
        return false
    }
    if let hintToken = hint.changeToken, hintToken != token { return false }
    if let hintZone = hint.zoneID, hintZone != zone { return false }
    return true
}

// MARK: - Outcomes

/// A failure of the fixture itself, such as a required success that was a failure.
struct ContractFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The value of a per-item success; records an issue and throws for a failure or a missing entry.
@discardableResult
func requireSuccess<Value>(
    _ result: Result<Value, SyncError>?, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
) throws -> Value {
    switch result {
    case .success(let value)?:
        return value
    case .failure(let error)?:
        Issue.record("\(what) failed: \(error)", sourceLocation: sourceLocation)
        throw ContractFailure("\(what) failed: \(error)")
    case nil:
        Issue.record("the response has no entry for \(what)", sourceLocation: sourceLocation)
        throw ContractFailure("the response has no entry for \(what)")
    }
}

/// Expects a per-item failure with `code`; returns the error (nil after recording an issue).
@discardableResult
func expectFailure<Value>(
    _ result: Result<Value, SyncError>?, _ code: SyncError.Code, sourceLocation: SourceLocation = #_sourceLocation
) -> SyncError? {
    switch result {
    case .failure(let error)?:
        #expect(error.code == code, "expected \(code), got \(error)", sourceLocation: sourceLocation)
        return error
    case .success(let value)?:
        Issue.record("expected \(code), got a success: \(value)", sourceLocation: sourceLocation)
        return nil
    case nil:
        Issue.record("expected \(code), got no entry for the item", sourceLocation: sourceLocation)
        return nil
    }
}

/// Expects a per-item success; returns the value (nil after recording an issue).
@discardableResult
func expectSuccess<Value>(
    _ result: Result<Value, SyncError>?, sourceLocation: SourceLocation = #_sourceLocation
) -> Value? {
    switch result {
    case .success(let value)?:
        return value
    case .failure(let error)?:
        Issue.record("expected a success, got \(error)", sourceLocation: sourceLocation)
        return nil
    case nil:
        Issue.record("expected a success, got no entry for the item", sourceLocation: sourceLocation)
        return nil
    }
}

/// Expects `body` to throw a `SyncError` with `code` (a whole-request failure); returns it.
@discardableResult
func expectThrows<R>(
    _ code: SyncError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> R
) async -> SyncError? {
    let error = await #expect(throws: SyncError.self, sourceLocation: sourceLocation) {
        _ = try await body()
    }
    if let error {
        #expect(error.code == code, "expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return error
}

/// The files of the assets the tests upload and download: one directory per test process,
/// removed by the system's temporary-file cleanup; each file has a name of its own.
enum AssetFiles {
    static let directory: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "logsync-contract-assets-\(ProcessInfo.processInfo.processIdentifier)", isDirectory: true)
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }()

    /// A new file holding `content`.
    static func write(_ content: [UInt8]) throws -> URL {
        let file = directory.appendingPathComponent(UUID().uuidString)
        try Data(content).write(to: file)
        return file
    }
}
