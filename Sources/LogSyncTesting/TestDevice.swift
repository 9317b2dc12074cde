import Foundation
import LogStore
import LogSync
import LogSyncServer
import Logging
import SyncModel
import Synchronization

/// One device of a notes app in a test: the app's notes, a `SyncEngine` on the device's own
/// log, and a delegate (``Delegate``) that behaves like Apple's CKSyncEngine sample app, with the
/// policies the test chooses.
///
/// ```swift
/// let phone = try TestDevice("phone", server: server, directory: directory)
/// let laptop = try TestDevice("laptop", server: server, directory: directory)
/// try phone.createZone(notes)
/// try phone.write(noteID, "Groceries")
/// try await phone.sync()      // sends, then fetches
/// try await laptop.sync()
/// #expect(laptop.title(noteID) == "Groceries")
/// ```
///
/// A note is a record of ``Policy/recordType`` whose string fields the app keeps (`title`, and
/// any others a test writes with ``edit(_:_:)``), and its asset fields (an asset or a list of
/// them, ``attach(_:_:_:)``) and its encrypted fields (``encrypt(_:_:_:)``), kept as the app attached them, then as the server saved them or a
/// fetch delivered them: ``attachments(_:)``). The engine is manual by default
/// (`automaticallySync = false`); a test that wants automatic sync, another clock or conditions
/// says so in the `configure` closure. What the delegate does, as the sample app does:
/// - it sends each note's fields on the engine's last known server record (so the change tag is
///   right without archiving system fields); a pending save whose note is gone is removed;
/// - fetched records and deletions update the notes (with ``Policy/keepsUnacknowledgedEdits``,
///   never over an edit the server has not acknowledged, nor bringing back a note whose deletion
///   is pending); a fetched zone deletion drops the zone's notes;
/// - a conflict (`serverRecordChanged`) is merged with ``Policy/merge``; a merge that differs
///   from the server's record is queued again, on the server's system fields;
/// - `zoneNotFound` queues the zone and the save again (and `userDeletedZone`, with
///   ``Policy/recreatesDeletedZones``); `unknownItem` queues the save again without system fields;
///   `serverResponseLost` (the answer lost again after the engine's own resend) queues the change
///   again; `quotaExceeded` (the account is full, F97) queues the edit again, to go with a later
///   send once there is room;
/// - an account change does what ``Policy/accountChanges`` says;
/// - on the shared database, where an app cannot create zones, `zoneNotFound` gives the edit up
///   (the zone is no longer shared), and `permissionFailure` (a read-only participant) gives the
///   edit up and shows the server's record again;
/// - shares (records of `Share.recordType`) are kept apart from the notes (``shares``): the
///   owner saves and deletes them with ``saveShare(_:)`` and ``deleteShare(_:)``, a participant
///   leaves with ``deleteShare(_:)``; a conflict on a share keeps the server's share with the
///   participants and permissions of the local one (their acceptance as the server has it); a
///   share save refused for good (`tooManyParticipants`, `alreadyShared`, …) shows the server's
///   share again;
/// - with ``Policy/parent``, each note is saved with the parent the app gives it (a record
///   hierarchy that a share may share, F123); a save refused with `referenceViolation` (that
///   parent does not exist) goes again with the parent the server has, until the next edit.
///
/// It also follows each local edit until the server acknowledges it (in a send's results, a
/// conflict's server record or a fetched record carrying it) or the app gives it up (a lost
/// conflict, a deleted zone, an account change): ``unacknowledgedEdits`` left at the end of a
/// test were lost.
public final class TestDevice: Sendable {
    /// A note's fields: name to text.
    public typealias Fields = [String: String]

    /// How the app behaves where apps differ.
    public struct Policy: Sendable {
        /// How a conflict is settled: the note's fields from the local note and the server's
        /// record. The server's record wins by default.
        public var merge: @Sendable (_ local: Fields, _ server: Fields) -> Fields
        /// Whether fetched changes leave an edit alone until the server acknowledges it (its save
        /// then goes out on the fetched record's system fields), and leave deleted a note whose
        /// deletion is not sent yet. `false` (the default): a fetched record replaces the note.
        public var keepsUnacknowledgedEdits: Bool
        /// Whether a save refused with `userDeletedZone` re-creates the zone and saves again, as
        /// after `zoneNotFound`. `false` by default: the app respects the deletion.
        public var recreatesDeletedZones: Bool
        /// What an account change does to the notes.
        public var accountChanges: AccountChanges
        /// The record type of the notes.
        public var recordType: String
        /// Whether the delegate reacts to the engine on its own, as the sample app does: it
        /// updates the notes from events, queues changes again after failures and removes the save
        /// of a note it no longer has. `true` by default. `false` (``scripted``): the test scripts
        /// every reaction (``TestDevice/onEvent(_:)``, ``TestDevice/queue(_:)``,
        /// ``TestDevice/provideBatches(_:)``); the delegate records events and contexts, changes
        /// nothing on an event, and sends the pending saves of the notes it has, skipping the
        /// others without removing them.
        public var reactsOnItsOwn: Bool
        /// The parent each note is saved with (a record hierarchy, F123), from its ID and fields;
        /// `nil` (the default): notes are saved with the parent the server last had.
        public var parent: (@Sendable (_ id: Record.ID, _ fields: Fields) -> Record.ID?)?

        /// What the app does on an account change (F105, F106).
        public enum AccountChanges: Sendable, Hashable {
            /// Nothing: the notes stay.
            case keepNotes
            /// Every note and edit is dropped, whatever the change.
            case dropNotes
            /// As Apple's sample: a sign-in queues every zone and note again (the app's data goes
            /// to the new account); a sign-out or a switch drops every note.
            case uploadOnSignIn
        }

        /// A policy: the server's record wins conflicts, fetched records replace notes, deleted
        /// zones stay deleted, account changes keep the notes, notes are of type `Note`, and the
        /// delegate reacts on its own.
        public init(
            merge: @escaping @Sendable (_ local: Fields, _ server: Fields) -> Fields = { _, server in server },
            keepsUnacknowledgedEdits: Bool = false, recreatesDeletedZones: Bool = false,
            accountChanges: AccountChanges = .keepNotes, recordType: String = "Note", reactsOnItsOwn: Bool = true,
            parent: (@Sendable (_ id: Record.ID, _ fields: Fields) -> Record.ID?)? = nil
        ) {
            self.parent = parent
            self.merge = merge
            self.keepsUnacknowledgedEdits = keepsUnacknowledgedEdits
            self.recreatesDeletedZones = recreatesDeletedZones
            self.accountChanges = accountChanges
            self.recordType = recordType
            self.reactsOnItsOwn = reactsOnItsOwn
        }

        /// A delegate whose every reaction the test scripts (``reactsOnItsOwn`` off): for a test
        /// that drives an engine step by step and checks exactly what it delivers and asks.
        public static var scripted: Policy { Policy(reactsOnItsOwn: false) }

        /// A merge of the titles alone by `resolve`, other fields taken from the server.
        public static func mergingTitles(
            _ resolve: @escaping @Sendable (_ local: String, _ server: String) -> String
        ) -> @Sendable (Fields, Fields) -> Fields {
            { local, server in
                var merged = server
                merged["title"] = resolve(local["title"] ?? "", server["title"] ?? "")
                return merged
            }
        }
    }

    /// How an edit ended, for the counters of ``Tally``.
    public struct Tally: Sendable, Hashable {
        /// Edits the server acknowledged.
        public var acknowledged = 0
        /// Conflicts the local edit won (queued again on the server's record).
        public var conflictsWon = 0
        /// Conflicts the local edit lost (the server's record was kept).
        public var conflictsLost = 0
        /// Edits dropped with their zone, deleted by another device.
        public var droppedWithZone = 0
        /// Edits dropped on an account change.
        public var droppedByAccountChange = 0
        /// Edits a fetched record replaced before the server acknowledged them (only without
        /// ``Policy/keepsUnacknowledgedEdits``).
        public var overwrittenByFetch = 0
        /// Edits the server refused with `permissionFailure` (a read-only participant's): given
        /// up, the server's record shown again.
        public var refused = 0
        /// Saves the server refused with `quotaExceeded`, each queued again (F97).
        public var overQuota = 0

        /// Adds another device's counts to these.
        public static func += (lhs: inout Tally, rhs: Tally) {
            lhs.acknowledged += rhs.acknowledged
            lhs.conflictsWon += rhs.conflictsWon
            lhs.conflictsLost += rhs.conflictsLost
            lhs.droppedWithZone += rhs.droppedWithZone
            lhs.droppedByAccountChange += rhs.droppedByAccountChange
            lhs.overwrittenByFetch += rhs.overwrittenByFetch
            lhs.refused += rhs.refused
            lhs.overQuota += rhs.overQuota
        }
    }

    /// The device's name: `phone`, `A`, …
    public let name: String
    /// The device log's directory.
    public let directory: URL
    /// The database the engine syncs with.
    public let database: any CloudDatabase
    private let configure: @Sendable (inout SyncEngine.Configuration) -> Void
    private let engineBox = Mutex<SyncEngine?>(nil)
    /// The engine's delegate: the app's notes and its answers to the engine.
    public let delegate: Delegate

    struct Store {
        var policy: Policy
        var notes: [Record.ID: Fields] = [:]
        /// The asset fields of each note (an asset, or a list of them), by key.
        var attachments: [Record.ID: [String: RecordValue]] = [:]
        /// The shares the app knows, as last fetched, saved or edited here.
        var shares: [Record.ID: Share] = [:]
        /// Shares edited here whose save the server has not acknowledged yet.
        var unsentShares: Set<Record.ID> = []
        /// Edits not acknowledged yet, by record: the note's fields when last edited here.
        var unacknowledged: [Record.ID: Fields] = [:]
        /// Record IDs whose next save goes without system fields (after `unknownItem`).
        var forgetSystemFields: Set<Record.ID> = []
        /// Notes saved with the parent the server has, not ``Policy/parent``'s, until edited
        /// again: the parent the policy names did not exist (`referenceViolation`).
        var keepServerParent: Set<Record.ID> = []
        var events: [SyncEngine.Event] = []
        var tally = Tally()
        var beforeEvent: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?
        var onEvent: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?
        var batches: (@Sendable (SyncEngine.SendChangesContext, SyncEngine) async -> SyncEngine.RecordZoneChangeBatch?)?
        var fetchOptions:
            (@Sendable (SyncEngine.FetchChangesContext, SyncEngine) async -> SyncEngine.FetchChangesOptions)?
        /// The batches ``Delegate/queue(_:)`` set, handed out one by one; `nil`: none queued.
        var queued: [SyncEngine.RecordZoneChangeBatch]?
        var batchContexts: [SyncEngine.SendChangesContext] = []
        var fetchContexts: [SyncEngine.FetchChangesContext] = []
        var waiters:
            [(id: UUID, check: @Sendable ([SyncEngine.Event]) -> Bool, continuation: CheckedContinuation<Void, Never>)] =
                []
    }

    /// A device syncing with `database`, its device log in `directory` (created if missing),
    /// opened with fast commits.
    ///
    /// - Parameters:
    ///   - name: The device's name in events, failures and its device ID.
    ///   - database: The database it syncs with.
    ///   - directory: Where its device log lives.
    ///   - policy: How its delegate settles conflicts and treats fetched changes.
    ///   - configure: Changes to the engine's configuration, applied at every start: manual sync
    ///     unless it sets `automaticallySync`.
    /// - Throws: what opening the device log or the engine throws.
    public init(
        _ name: String, database: any CloudDatabase, directory: URL, policy: Policy = Policy(),
        configure: @escaping @Sendable (inout SyncEngine.Configuration) -> Void = { _ in }
    ) throws {
        self.name = name
        self.directory = directory
        self.database = database
        self.configure = configure
        self.delegate = Delegate(policy: policy)
        try startEngine()
    }

    /// A device of `user` on `server`, its device log in `directory/name`.
    ///
    /// - Parameters:
    ///   - name: The device's name, its device ID and its folder under `directory`.
    ///   - server: The server it syncs with, in process.
    ///   - user: The user it signs in as.
    ///   - scope: The database it syncs: private or shared.
    ///   - directory: The folder its own folder is made in.
    ///   - fetchResultsLimit: The engine's page size for fetches, or `nil` for the server's.
    ///   - policy: How its delegate settles conflicts and treats fetched changes.
    public convenience init(
        _ name: String, server: SyncServer, user: UserID = "alice", scope: DatabaseScope = .private,
        directory: URL, fetchResultsLimit: Int? = nil, policy: Policy = Policy()
    ) throws {
        try self.init(
            name, database: server.database(for: user, scope: scope, device: DeviceID(name)),
            directory: directory.appendingPathComponent(name, isDirectory: true), policy: policy
        ) { configuration in configuration.fetchResultsLimit = fetchResultsLimit }
    }

    /// The engine now (``startEngine()`` replaces it).
    public var engine: SyncEngine { engineBox.withLock { $0! } }

    /// Opens an engine on the device's log, closing the one before: the app quits and launches
    /// again, its notes kept (they are the app's own store).
    public func startEngine() throws {
        engineBox.withLock { $0 = nil }
        let log = try DeviceLog(
            directory: directory, options: LogEnvironment.Options(durability: .fast, initialMapSize: 16 << 20))
        var configuration = SyncEngine.Configuration(database: database, deviceLog: log, delegate: delegate)
        configuration.automaticallySync = false
        configuration.logger = Logger(label: "LogSyncTesting.TestDevice.\(name)") { _ in SwiftLogNoOpLogHandler() }
        configure(&configuration)
        let engine = try SyncEngine(configuration)
        engineBox.withLock { $0 = engine }
    }

    /// Lets the engine go, as an app disposes of it: the device no longer holds it, and
    /// ``engine`` is unavailable until ``startEngine()``. The notes and events stay.
    public func releaseEngine() {
        engineBox.withLock { $0 = nil }
    }

    // MARK: What the user does

    /// Creates (or queues) a zone.
    public func createZone(_ zoneID: RecordZone.ID) throws {
        try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zoneID))])
    }

    /// Deletes a zone and the notes in it.
    public func deleteZone(_ zoneID: RecordZone.ID) throws {
        delegate.store.withLock { store in
            store.notes = store.notes.filter { $0.key.zoneID != zoneID }
            store.attachments = store.attachments.filter { $0.key.zoneID != zoneID }
            store.unacknowledged = store.unacknowledged.filter { $0.key.zoneID != zoneID }
            store.dropShares { $0.zoneID == zoneID }
        }
        try engine.state.add(pendingDatabaseChanges: [.deleteZone(zoneID)])
    }

    /// Sets a note's title and queues its save.
    public func write(_ id: Record.ID, _ title: String) throws {
        try edit(id, ["title": title])
    }

    /// Sets several notes' titles and queues their saves, in this order, with one append.
    public func write(_ notes: [(Record.ID, String)]) throws {
        delegate.store.withLock { store in for (id, title) in notes { store.edit(id, ["title": title]) } }
        try engine.state.add(pendingRecordZoneChanges: notes.map { .saveRecord($0.0) })
    }

    /// Sets some of a note's fields (creating the note) and queues its save.
    public func edit(_ id: Record.ID, _ fields: Fields) throws {
        delegate.store.withLock { $0.edit(id, fields) }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// Puts an asset, or a list of assets (`.asset` or `.list` of `.asset`), in a note's field
    /// (creating the note) and queues its save: the user attaches files.
    public func attach(_ id: Record.ID, _ key: String, _ value: RecordValue) throws {
        delegate.store.withLock { store in
            store.edit(id, [:])
            store.attachments[id, default: [:]][key] = value
        }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
    }

    /// Puts a value in one of a note's encrypted fields (`Record/encryptedValues`, creating the
    /// note) and queues its save: the engine seals it before it leaves the device (F129).
    public func encrypt(_ id: Record.ID, _ key: String, _ value: RecordValue) throws {
        try attach(id, key, .encrypted(.opened(value)))
    }

    /// The plaintext of a note's encrypted field, as this device has it; `nil` when the note has
    /// no such field, or it is still sealed.
    public func decrypted(_ id: Record.ID, _ key: String) -> RecordValue? {
        if case .encrypted(let value)? = attachments(id)?[key] { value.plaintext } else { nil }
    }

    /// Deletes a note and queues its deletion.
    public func delete(_ id: Record.ID) throws {
        delegate.store.withLock { store in
            store.notes[id] = nil
            store.attachments[id] = nil
            store.unacknowledged[id] = nil
        }
        try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
    }

    /// Saves a share (new, or edited from ``shares``) and queues its save: the owner shares a
    /// zone, invites or removes participants.
    public func saveShare(_ share: Share) throws {
        delegate.store.withLock { store in
            store.shares[share.recordID] = share
            store.unsentShares.insert(share.recordID)
        }
        try engine.state.add(pendingRecordZoneChanges: [.saveRecord(share.recordID)])
    }

    /// Forgets a share and queues its deletion: the owner stops sharing, or a participant leaves.
    public func deleteShare(_ id: Record.ID) throws {
        delegate.store.withLock { store in store.dropShares { $0 == id } }
        try engine.state.add(pendingRecordZoneChanges: [.deleteRecord(id)])
    }

    /// Sends, then fetches.
    public func sync() async throws {
        try await engine.sendChanges()
        try await engine.fetchChanges()
    }

    /// Creates `zone`, writes the note `id` titled `title` and syncs, then lets each of `others`
    /// sync: every device starts from the same note, as most stories of two devices do.
    ///
    /// ```swift
    /// try await phone.seedNote(noteID, "Groceries", in: notes, syncing: laptop)
    /// #expect(laptop.title(noteID) == "Groceries")
    /// ```
    ///
    /// - Throws: What the devices' sends and fetches throw.
    public func seedNote(
        _ id: Record.ID, _ title: String, in zone: RecordZone.ID, syncing others: TestDevice...
    ) async throws {
        try createZone(zone)
        try write(id, title)
        try await sync()
        for other in others { try await other.sync() }
    }

    // MARK: What the test chooses

    /// Changes the policy from now on.
    public func setPolicy(_ change: (inout Policy) -> Void) { delegate.setPolicy(change) }

    /// Merges conflicts by title: `(local, server) -> merged`; other fields come from the server.
    public func resolveConflicts(with resolve: @escaping @Sendable (_ local: String, _ server: String) -> String) {
        setPolicy { $0.merge = Policy.mergingTitles(resolve) }
    }

    /// Runs `body` inside `handleEvent`, after the device's own handling.
    public func onEvent(_ body: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?) { delegate.onEvent(body) }

    /// Runs `body` inside `handleEvent`, before the device's own handling.
    public func beforeEvent(_ body: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?) {
        delegate.beforeEvent(body)
    }

    /// Replaces the device's answers to `nextRecordZoneChangeBatch` (`nil`: its own again).
    public func provideBatches(
        _ body: (@Sendable (SyncEngine.SendChangesContext, SyncEngine) async -> SyncEngine.RecordZoneChangeBatch?)?
    ) {
        delegate.provideBatches(body)
    }

    /// Hands out exactly these batches, one per `nextRecordZoneChangeBatch`, then `nil`
    /// (``Delegate/queue(_:)``).
    public func queue(_ batches: [SyncEngine.RecordZoneChangeBatch]) { delegate.queue(batches) }

    /// Replaces the device's answers to `nextFetchChangesOptions` (`nil`: the context's options).
    public func provideFetchOptions(
        _ body: (@Sendable (SyncEngine.FetchChangesContext, SyncEngine) async -> SyncEngine.FetchChangesOptions)?
    ) {
        delegate.provideFetchOptions(body)
    }

    // MARK: What the test reads

    /// A note's title, or `nil` when there is no such note.
    public func title(_ id: Record.ID) -> String? { delegate.store.withLock { $0.notes[id].map { $0["title"] ?? "" } } }

    /// A note's fields, or `nil` when there is no such note.
    public func fields(_ id: Record.ID) -> Fields? { delegate.store.withLock { $0.notes[id] } }

    /// A note's asset fields by key (`[:]` for a note without any), or `nil` when there is no
    /// such note.
    public func attachments(_ id: Record.ID) -> [String: RecordValue]? {
        delegate.store.withLock { store in store.notes[id] == nil ? nil : store.attachments[id] ?? [:] }
    }

    /// The asset in a note's field `key`, if it holds one.
    public func asset(_ id: Record.ID, _ key: String) -> Asset? {
        if case .asset(let asset)? = attachments(id)?[key] { asset } else { nil }
    }

    /// Every note's title.
    public var notes: [Record.ID: String] { delegate.store.withLock { $0.notes.mapValues { $0["title"] ?? "" } } }

    /// The IDs of the notes the app has, in one order for every run (by their descriptions), so
    /// that a seeded test picks the same note each time.
    public var noteIDs: [Record.ID] {
        delegate.store.withLock { $0.notes.keys.sorted { $0.description < $1.description } }
    }

    /// A note `pick` chooses from ``noteIDs`` (never empty when `pick` runs), or `nil` if the
    /// app has none: a seeded test's choice of a note to change.
    public func noteID(pickedBy pick: ([Record.ID]) -> Record.ID) -> Record.ID? {
        let ids = noteIDs
        return ids.isEmpty ? nil : pick(ids)
    }

    /// The shares the app knows: fetched, saved, or edited here and not sent yet.
    public var shares: [Record.ID: Share] { delegate.store.withLock { $0.shares } }

    /// Edits the server has not acknowledged and the app has not given up, by record.
    public var unacknowledgedEdits: [Record.ID: Fields] { delegate.store.withLock { $0.unacknowledged } }

    /// How the edits so far ended.
    public var tally: Tally { delegate.store.withLock { $0.tally } }

    /// Every event delivered so far, in order.
    public var events: [SyncEngine.Event] { delegate.events }

    /// The events delivered so far without `stateUpdate`s.
    public var syncEvents: [SyncEngine.Event] { events.filter { $0.kind != .stateUpdate } }

    /// Forgets the events recorded so far.
    public func clearEvents() { delegate.clearEvents() }

    /// The contexts `nextRecordZoneChangeBatch` was called with, in order.
    public var batchContexts: [SyncEngine.SendChangesContext] { delegate.batchContexts }

    /// The contexts `nextFetchChangesOptions` was called with, in order.
    public var fetchContexts: [SyncEngine.FetchChangesContext] { delegate.fetchContexts }

    /// Waits until the events delivered so far satisfy `condition` (checked now and after each
    /// event), or `limit` of wall-clock time has passed.
    ///
    /// - Throws: ``TestDeviceTimeout`` naming `what` when the limit passes first.
    public func waitForEvents(
        _ what: String, limit: Duration = .seconds(30), _ condition: @escaping @Sendable ([SyncEngine.Event]) -> Bool
    ) async throws {
        let id = UUID()
        let satisfied = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let events = self.delegate.store.withLock { store in
                        store.waiters.append((id, condition, continuation))
                        return store.events
                    }
                    self.delegate.resumeWaiters(events)
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            self.delegate.resumeWaiter(id)
            return first
        }
        guard satisfied else { throw TestDeviceTimeout(device: name, what: what, limit: limit) }
    }
}

/// ``TestDevice/waitForEvents(_:limit:_:)`` waited longer than its limit.
public struct TestDeviceTimeout: Error, Sendable, CustomStringConvertible {
    public let device: String
    public let what: String
    public let limit: Duration

    public var description: String { "\(device): timed out after \(limit) waiting until \(what)" }
}

extension TestDevice.Store {
    /// The app edits a note: the fields are set and the edit waits for the server.
    mutating func edit(_ id: Record.ID, _ fields: TestDevice.Fields) {
        notes[id, default: [:]].merge(fields) { $1 }
        unacknowledged[id] = notes[id]
        keepServerParent.remove(id)
    }

    /// Applies an event to the notes; returns the zone and record changes to queue again.
    ///
    /// - Parameters:
    ///   - serverFields: The last known server record's fields of each change the server refused
    ///     with `permissionFailure` (none for a record it never had).
    ///   - serverShares: The last known server share of each failed share save (none for a share
    ///     the server never had).
    ///   - onSharedDatabase: Whether the engine syncs with a shared database, where the app
    ///     creates no zones.
    mutating func handle(
        _ event: SyncEngine.Event, pendingDeletions deleting: Set<Record.ID>,
        serverFields: [Record.ID: TestDevice.Fields] = [:], serverShares: [Record.ID: Share] = [:],
        onSharedDatabase: Bool = false
    ) -> ([SyncEngine.PendingDatabaseChange], [SyncEngine.PendingRecordZoneChange]) {
        var zones: [SyncEngine.PendingDatabaseChange] = []
        var requeue: [SyncEngine.PendingRecordZoneChange] = []
        switch event {
        case .accountChange(let change):
            switch (policy.accountChanges, change.changeType) {
            case (.keepNotes, _):
                break
            case (.uploadOnSignIn, .signIn):
                zones = Set(notes.keys.map(\.zoneID)).sorted { $0.zoneName < $1.zoneName }.map {
                    .saveZone(RecordZone(zoneID: $0))
                }
                requeue = notes.keys.sorted { $0.recordName < $1.recordName }.map { .saveRecord($0) }
            case (.dropNotes, _), (.uploadOnSignIn, _):
                tally.droppedByAccountChange += unacknowledged.count
                notes = [:]
                attachments = [:]
                unacknowledged = [:]
                forgetSystemFields = []
                dropShares { _ in true }
            }
        case .fetchedDatabaseChanges(let changes):
            let gone = Set(changes.deletions.map(\.zoneID))
            notes = notes.filter { !gone.contains($0.key.zoneID) }
            attachments = attachments.filter { !gone.contains($0.key.zoneID) }
            dropShares { gone.contains($0.zoneID) }
            let dropped = unacknowledged.filter { gone.contains($0.key.zoneID) }
            tally.droppedWithZone += dropped.count
            for id in dropped.keys { unacknowledged[id] = nil }
        case .fetchedRecordZoneChanges(let changes):
            for modification in changes.modifications {
                let id = modification.record.recordID
                if modification.record.recordType == Share.recordType {
                    // A share whose deletion is not sent yet stays deleted.
                    if !deleting.contains(id) { fetched(share: modification.record) }
                    continue
                }
                if policy.keepsUnacknowledgedEdits, deleting.contains(id) { continue }
                let fields = Self.fields(of: modification.record)
                if let edit = unacknowledged[id] {
                    if Self.carries(fields, edit) {
                        acknowledge(id)  // the server has the edit: an earlier answer was lost
                    } else if policy.keepsUnacknowledgedEdits {
                        continue
                    } else {
                        unacknowledged[id] = nil
                        tally.overwrittenByFetch += 1
                    }
                }
                notes[id] = fields
                attachments[id] = Self.attachments(of: modification.record)
            }
            for deletion in changes.deletions
            where deletion.recordType == Share.recordType && !unsentShares.contains(deletion.recordID) {
                shares[deletion.recordID] = nil
            }
            for deletion in changes.deletions
            where deletion.recordType != Share.recordType
                && (!policy.keepsUnacknowledgedEdits || unacknowledged[deletion.recordID] == nil)
            {
                notes[deletion.recordID] = nil
                attachments[deletion.recordID] = nil
                unacknowledged[deletion.recordID] = nil
            }
        case .sentRecordZoneChanges(let sent):
            for record in sent.savedRecords where record.recordType == Share.recordType {
                unsentShares.remove(record.recordID)
                shares[record.recordID] = try? Share(record: record)
            }
            for id in sent.deletedRecordIDs where !unsentShares.contains(id) { shares[id] = nil }
            for failure in sent.failedRecordSaves where failure.record.recordType == Share.recordType {
                let id = failure.record.recordID
                if let change = failedShareSave(id, failure.error, server: serverShares[id]) { requeue.append(change) }
            }
            for (id, error) in sent.failedRecordDeletes {
                if error.code == .permissionFailure { refuse(id, server: serverFields[id]) }
                // The answer was lost again after the engine's resend: the deletion goes once more.
                if error.code == .serverResponseLost, notes[id] == nil, shares[id] == nil {
                    requeue.append(.deleteRecord(id))
                }
            }
            for record in sent.savedRecords {
                if let edit = unacknowledged[record.recordID], Self.carries(Self.fields(of: record), edit) {
                    acknowledge(record.recordID)
                }
                // The saved assets (now with digest and size) replace the ones attached, unless
                // other files were attached since.
                for (key, value) in Self.attachments(of: record)
                where attachments[record.recordID]?[key].map({ Self.files(of: $0) == Self.files(of: value) }) ?? false {
                    attachments[record.recordID]?[key] = value
                }
            }
            for failure in sent.failedRecordSaves where failure.record.recordType != Share.recordType {
                let id = failure.record.recordID
                switch failure.error.code {
                case .permissionFailure:
                    refuse(id, server: serverFields[id])
                case .serverResponseLost:
                    // The answer was lost again after the engine's resend: the app sends the edit
                    // once more; if the server had applied it, the conflict it gets says so.
                    if unacknowledged[id] != nil { requeue.append(.saveRecord(id)) }
                case .zoneNotFound where onSharedDatabase:
                    // The zone is no longer shared with this user: the edit goes with it.
                    if unacknowledged.removeValue(forKey: id) != nil { tally.droppedWithZone += 1 }
                    notes[id] = nil
                case .serverRecordChanged:
                    guard let server = failure.error.serverRecord.map(Self.fields) else { break }
                    if conflicted(id, server: server) { requeue.append(.saveRecord(id)) }
                case .zoneNotFound, .userDeletedZone:
                    guard notes[id] != nil, failure.error.code == .zoneNotFound || policy.recreatesDeletedZones else {
                        break
                    }
                    zones.append(.saveZone(RecordZone(zoneID: id.zoneID)))
                    requeue.append(.saveRecord(id))
                case .unknownItem:
                    guard notes[id] != nil else { break }
                    forgetSystemFields.insert(id)
                    requeue.append(.saveRecord(id))
                case .quotaExceeded:
                    // The account is full (F97): the engine does not retry, the app keeps the
                    // edit pending, and it goes with the next send, once there is room.
                    if unacknowledged[id] != nil {
                        tally.overQuota += 1
                        requeue.append(.saveRecord(id))
                    }
                case .referenceViolation where policy.parent != nil:
                    // The parent the note names does not exist (deleted, or not saved yet): the
                    // edit goes with the parent the server has, until the note is edited again.
                    guard notes[id] != nil, keepServerParent.insert(id).inserted else { break }
                    requeue.append(.saveRecord(id))
                default:
                    break
                }
            }
        default:
            break
        }
        return (zones, requeue)
    }

    /// The server refused a change of `id` for want of permission: the edit is given up and the
    /// note is the server's again (`server`, or none if the server never had it).
    private mutating func refuse(_ id: Record.ID, server: TestDevice.Fields?) {
        if unacknowledged.removeValue(forKey: id) != nil || notes[id] != server { tally.refused += 1 }
        notes[id] = server
    }

    /// Forgets the shares `condition` selects, edited or not.
    mutating func dropShares(_ condition: (Record.ID) -> Bool) {
        for id in shares.keys where condition(id) { shares[id] = nil }
        unsentShares = unsentShares.filter { !condition($0) }
    }

    /// A fetched share: replaces the app's, or, while an edit of it waits to be sent, is merged
    /// with that edit.
    private mutating func fetched(share record: Record) {
        guard let server = try? Share(record: record) else { return }
        let id = record.recordID
        if unsentShares.contains(id), let local = shares[id] {
            shares[id] = Self.merge(local, server: server)
        } else {
            shares[id] = server
        }
    }

    /// A save of a share failed: a conflict is merged and sent again, a share without its
    /// server record is sent as new; a transient failure leaves it pending (the engine sends it
    /// again); otherwise (the zone gone, no permission, too many participants, already shared)
    /// the edit is given up and the share is the server's again (`server`, or none if the
    /// server never had it). Returns the change to queue again, if any.
    private mutating func failedShareSave(
        _ id: Record.ID, _ error: SyncError, server: Share?
    ) -> SyncEngine.PendingRecordZoneChange? {
        guard let local = shares[id], unsentShares.contains(id), !error.isTransient, error.code != .operationCancelled
        else {
            return nil
        }
        switch error.code {
        case .serverRecordChanged:
            guard let record = error.serverRecord, let server = try? Share(record: record) else { return nil }
            shares[id] = Self.merge(local, server: server)
            return .saveRecord(id)
        case .unknownItem:
            forgetSystemFields.insert(id)
            return .saveRecord(id)
        case .serverResponseLost:
            return .saveRecord(id)
        default:
            dropShares { $0 == id }
            shares[id] = server
            return nil
        }
    }

    /// A share edited here merged with the server's: the server's share and owner, the local
    /// share's other participants with their local permissions and the server's acceptance
    /// status (a participant new here is invited).
    static func merge(_ local: Share, server: Share) -> Share {
        var merged = server
        let others = local.participants.filter { $0.role != .owner }.map { participant in
            guard var known = server.participants.first(where: { $0.userIdentity.matches(participant.userIdentity) })
            else {
                return participant
            }
            known.permission = participant.permission
            return known
        }
        merged.participants = server.participants.filter { $0.role == .owner } + others
        return merged
    }

    /// A save of `id` conflicted with the server's `server` fields: merges by the policy, and
    /// returns whether the merge must be sent.
    private mutating func conflicted(_ id: Record.ID, server: TestDevice.Fields) -> Bool {
        guard let local = notes[id] else { return false }
        guard let edit = unacknowledged[id] else {
            notes[id] = server  // nothing edited here since the server last acknowledged
            return false
        }
        let merged = policy.merge(local, server)
        if merged != server {
            tally.conflictsWon += 1
            notes[id] = merged
            unacknowledged[id] = merged
            return true
        }
        if Self.carries(server, edit) {
            acknowledge(id)  // an earlier send of this edit did reach the server
        } else {
            tally.conflictsLost += 1
            unacknowledged[id] = nil
        }
        notes[id] = server
        return false
    }

    private mutating func acknowledge(_ id: Record.ID) {
        unacknowledged[id] = nil
        tally.acknowledged += 1
    }

    /// Whether a record's `fields` hold every field of `edit` with its value.
    static func carries(_ fields: TestDevice.Fields, _ edit: TestDevice.Fields) -> Bool {
        edit.allSatisfy { fields[$0.key] == $0.value }
    }

    /// The string fields of a record.
    static func fields(of record: Record) -> TestDevice.Fields { record.stringFields }

    /// The asset fields and the encrypted fields of a record, by key.
    static func attachments(of record: Record) -> [String: RecordValue] {
        var found: [String: RecordValue] = [:]
        for (key, _) in record.assets { found[key] = record[key] }
        for key in record.encryptedValues.allKeys() { found[key] = record[key] }
        return found
    }

    /// The paths of the local files of a field's assets, in order.
    static func files(of value: RecordValue) -> [String?] {
        switch value {
        case .asset(let asset): [asset.fileURL?.path]
        case .list(let values): values.flatMap(files(of:))
        default: []
        }
    }
}
