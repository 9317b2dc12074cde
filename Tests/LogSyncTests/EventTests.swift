import Foundation
import LogStore
import SyncModel
import SyncTestKit
import Testing

@testable import LogSync

/// `SyncEngine.Event`: its twelve cases, their payloads and descriptions (F33–F45, F50).
@Suite("Events")
struct EventTests {
    typealias F = Fixtures
    typealias Event = SyncEngine.Event

    static let alice = Record.ID(recordName: "_alice")
    static let bob = Record.ID(recordName: "_bob")
    static let fetchContext = SyncEngine.FetchChangesContext(
        reason: .manual, options: SyncEngine.FetchChangesOptions(scope: .zoneIDs([F.notes])))
    static let sendContext = SyncEngine.SendChangesContext(
        reason: .scheduled, options: SyncEngine.SendChangesOptions(scope: .recordIDs([F.a])))

    /// One event of each case, with its case name, `CKSyncEngineEventType` raw value, and the
    /// IDs its description must name.
    static let samples: [(event: Event, name: String, rawValue: Int, ids: [String])] = [
        (.stateUpdate(.init(offset: LogOffset(42))), "stateUpdate", 0, ["42"]),
        (
            .accountChange(.init(changeType: .switchAccounts(previousUser: alice, currentUser: bob))),
            "accountChange", 1, ["switchAccounts", alice.description, bob.description]
        ),
        (
            .fetchedDatabaseChanges(
                .init(
                    modifications: [SyncModel.DatabaseChange.Modification(zoneID: F.notes)],
                    deletions: [SyncModel.DatabaseChange.Deletion(zoneID: F.photos, reason: .purged)])),
            "fetchedDatabaseChanges", 2, [F.notes.description, F.photos.description, "purged"]
        ),
        (
            .fetchedRecordZoneChanges(
                .init(
                    modifications: [RecordZoneChange.Modification(record: F.serverRecord(F.a, tag: "1"))],
                    deletions: [RecordZoneChange.Deletion(recordID: F.b, recordType: "Note")])),
            "fetchedRecordZoneChanges", 3, [F.a.description, F.b.description]
        ),
        (
            .sentDatabaseChanges(
                .init(
                    savedZones: [RecordZone(zoneID: F.notes)],
                    failedZoneSaves: [.init(zone: RecordZone(zoneID: F.shared), error: SyncError(.badDatabase))],
                    deletedZoneIDs: [F.photos],
                    failedZoneDeletes: [RecordZone.ID(zoneName: "Gone"): SyncError(.zoneNotFound)])),
            "sentDatabaseChanges", 4,
            [F.notes.description, F.shared.description, "badDatabase", F.photos.description, "Gone", "zoneNotFound"]
        ),
        (
            .sentRecordZoneChanges(
                .init(
                    savedRecords: [F.serverRecord(F.a, tag: "2")],
                    failedRecordSaves: [.init(record: F.clientRecord(F.b), error: SyncError(.serverRecordChanged))],
                    deletedRecordIDs: [F.c],
                    failedRecordDeletes: [F.x: SyncError(.unknownItem)])),
            "sentRecordZoneChanges", 5,
            [F.a.description, F.b.description, "serverRecordChanged", F.c.description, F.x.description, "unknownItem"]
        ),
        (.willFetchChanges(.init(context: fetchContext)), "willFetchChanges", 6, ["manual", F.notes.description]),
        (.willFetchRecordZoneChanges(.init(zoneID: F.notes)), "willFetchRecordZoneChanges", 7, [F.notes.description]),
        (
            .didFetchRecordZoneChanges(.init(zoneID: F.photos, error: SyncError(.zoneNotFound))),
            "didFetchRecordZoneChanges", 8, [F.photos.description, "zoneNotFound"]
        ),
        (.didFetchChanges(.init(context: fetchContext)), "didFetchChanges", 9, ["manual", F.notes.description]),
        (.willSendChanges(.init(context: sendContext)), "willSendChanges", 10, ["scheduled", F.a.description]),
        (.didSendChanges(.init(context: sendContext)), "didSendChanges", 11, ["scheduled", F.a.description]),
    ]

    /// The case name, by an exhaustive switch: this stops compiling if a case is added or removed.
    static func caseName(_ event: Event) -> String {
        switch event {
        case .stateUpdate: "stateUpdate"
        case .accountChange: "accountChange"
        case .fetchedDatabaseChanges: "fetchedDatabaseChanges"
        case .fetchedRecordZoneChanges: "fetchedRecordZoneChanges"
        case .sentDatabaseChanges: "sentDatabaseChanges"
        case .sentRecordZoneChanges: "sentRecordZoneChanges"
        case .willFetchChanges: "willFetchChanges"
        case .willFetchRecordZoneChanges: "willFetchRecordZoneChanges"
        case .didFetchRecordZoneChanges: "didFetchRecordZoneChanges"
        case .didFetchChanges: "didFetchChanges"
        case .willSendChanges: "willSendChanges"
        case .didSendChanges: "didSendChanges"
        }
    }

    @Test("F33: exactly twelve cases, one sample of each, with CKSyncEngineEventType's raw values")
    func twelveCases() {
        #expect(Event.Kind.allCases.count == 12)
        #expect(Set(Self.samples.map(\.rawValue)) == Set(0..<12))
        #expect(Set(Self.samples.map { Self.caseName($0.event) }).count == 12)
    }

    @Test("F33, F50: case name, raw value and description of each case", arguments: 0..<12)
    func eachCase(index: Int) {
        let sample = Self.samples[index]
        #expect(Self.caseName(sample.event) == sample.name)
        #expect(sample.event.kind.rawValue == sample.rawValue)
        #expect("\(sample.event.kind)" == sample.name)
        let text = String(describing: sample.event)
        #expect(text.hasPrefix(sample.name + "("), "\(text)")
        for id in sample.ids { #expect(text.contains(id), "\(text) lacks \(id)") }
    }

    @Test("F50: each payload's description has its type name and the event's fields", arguments: 0..<12)
    func payloadDescription(index: Int) {
        let event = Self.samples[index].event
        let payload = event.payload
        let typeName = String(describing: type(of: payload))
        #expect(payload.description == typeName + String(event.description.dropFirst(Self.samples[index].name.count)))
    }

    @Test("F34: stateUpdate carries the device-log offset of the state")
    func stateUpdate() {
        let update = Event.StateUpdate(offset: LogOffset(7))
        #expect(update.offset == LogOffset(7))
        #expect(update != Event.StateUpdate(offset: LogOffset(8)))
    }

    @Test(
        "F35: account change cases carry their users; the ObjC view has nil where no user is",
        arguments: [
            (Event.AccountChange.ChangeType.signIn(currentUser: alice), nil, alice),
            (.signOut(previousUser: alice), alice, nil),
            (.switchAccounts(previousUser: alice, currentUser: bob), alice, bob),
        ] as [(Event.AccountChange.ChangeType, Record.ID?, Record.ID?)])
    func accountChange(changeType: Event.AccountChange.ChangeType, previous: Record.ID?, current: Record.ID?) {
        let change = Event.AccountChange(changeType: changeType)
        #expect(change.changeType == changeType)
        #expect(change.previousUser == previous)
        #expect(change.currentUser == current)
    }

    @Test("F35: ChangeType is Equatable on case and users")
    func changeTypeEquatable() {
        typealias T = Event.AccountChange.ChangeType
        #expect(T.signIn(currentUser: Self.alice) == .signIn(currentUser: Self.alice))
        #expect(T.signIn(currentUser: Self.alice) != .signIn(currentUser: Self.bob))
        #expect(T.signIn(currentUser: Self.alice) != .signOut(previousUser: Self.alice))
        #expect(
            T.switchAccounts(previousUser: Self.alice, currentUser: Self.bob)
                != .switchAccounts(previousUser: Self.bob, currentUser: Self.alice))
    }

    @Test("F36, F41, F42, F45: will/did payloads carry their context")
    func contexts() {
        #expect(
            Event.WillFetchChanges(context: Self.fetchContext).context
                == Event.DidFetchChanges(context: Self.fetchContext).context)
        #expect(Event.WillSendChanges(context: Self.sendContext).context.options.scope == .recordIDs([F.a]))
        #expect(Event.DidSendChanges(context: Self.sendContext).context.reason == .scheduled)
    }

    @Test("F37, F39, F40: fetched payload fields")
    func fetchedFields() {
        let deletion = SyncModel.DatabaseChange.Deletion(zoneID: F.photos, reason: .encryptedDataReset)
        let database = Event.FetchedDatabaseChanges(deletions: [deletion])
        #expect(database.modifications.isEmpty)
        #expect(database.deletions.first?.reason == .encryptedDataReset)

        let zone = Event.FetchedRecordZoneChanges(deletions: [
            RecordZoneChange.Deletion(recordID: F.b, recordType: "Note")
        ])
        #expect(zone.deletions.first?.recordType == "Note")

        #expect(Event.DidFetchRecordZoneChanges(zoneID: F.notes).error == nil)
        #expect(
            Event.DidFetchRecordZoneChanges(zoneID: F.notes, error: SyncError(.zoneNotFound)).error?.code
                == .zoneNotFound)
        #expect(Event.WillFetchRecordZoneChanges(zoneID: F.notes).zoneID == F.notes)
    }

    @Test("F43, F44: sent payload fields and failures")
    func sentFields() {
        let failedSave = Event.SentRecordZoneChanges.FailedRecordSave(
            record: F.clientRecord(F.b), error: SyncError(.serverRecordChanged))
        let sent = Event.SentRecordZoneChanges(
            savedRecords: [F.serverRecord(F.a, tag: "2")], failedRecordSaves: [failedSave],
            deletedRecordIDs: [F.c], failedRecordDeletes: [F.x: SyncError(.unknownItem)])
        #expect(sent.savedRecords.map(\.recordChangeTag) == ["2"])
        #expect(sent.failedRecordSaves.map(\.record.recordID) == [F.b])
        #expect(sent.failedRecordSaves.first?.error.code == .serverRecordChanged)
        #expect(sent.deletedRecordIDs == [F.c])
        #expect(sent.failedRecordDeletes[F.x]?.code == .unknownItem)

        let failedZone = Event.SentDatabaseChanges.FailedZoneSave(
            zone: RecordZone(zoneID: F.shared), error: SyncError(.badDatabase))
        let database = Event.SentDatabaseChanges(failedZoneSaves: [failedZone], deletedZoneIDs: [F.photos])
        #expect(database.savedZones.isEmpty && database.failedZoneDeletes.isEmpty)
        #expect(database.failedZoneSaves.first?.zone.zoneID == F.shared)
        #expect(database.failedZoneSaves.first?.error.code == .badDatabase)
        #expect(database.deletedZoneIDs == [F.photos])
    }

    @Test("F50: long lists name ten IDs and count the rest")
    func longListsAreCut() {
        let ids = (0..<30).map { F.id("r\($0)") }
        let text = String(describing: Event.sentRecordZoneChanges(.init(deletedRecordIDs: ids)))
        #expect(text.contains(ids[9].description))
        #expect(!text.contains(ids[10].description))
        #expect(text.contains("20 more"))
    }
}
