import Foundation
import LogStore
import LogSyncServer
import SyncModel
import Testing

/// The owner rule (F127, F138): a private database holds only its own user's zones. A request
/// naming a zone of another owner is refused per item (`invalidArguments` for writes,
/// `zoneNotFound` for reads) and writes nothing; the user's own record name as owner is the
/// same as `__defaultOwner__`. The shared database reaches nothing of another user's (F120,
/// F138). Docs/Protocol.md, "Zone owners".
@Suite("Zone owners: a private database holds only its user's zones")
struct ZoneOwnerRuleTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// Alice has a Notes zone with one note; returns her user record name.
    static func aliceHasANote(_ server: SyncServer) async throws -> String {
        let alice = server.database(for: "alice", device: "phone")
        _ = try await alice.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        let saved = try await alice.modifyRecords(saving: [note("secret", "alice's")], deleting: [])
        #expect(failure(saved.saveResults[Record.ID(recordName: "secret", zoneID: notes)]) == nil)
        return try server.userRecordID(for: "alice").recordName
    }

    /// Alice has a note (see ``aliceHasANote(_:)``), and bob a Notes zone of his own: alice's
    /// user record name, and bob's database.
    static func aliceAndBobHaveNotes(_ server: SyncServer) async throws -> (aliceName: String, bob: InProcessDatabase) {
        let aliceName = try await aliceHasANote(server)
        let bob = server.database(for: "bob")
        _ = try await bob.modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        return (aliceName, bob)
    }

    /// Alice has a note (see ``aliceHasANote(_:)``): bob's database, and alice's Notes zone as
    /// bob would name it.
    static func bobAndAlicesNotes(
        _ server: SyncServer
    ) async throws -> (bob: InProcessDatabase, alicesNotes: RecordZone.ID) {
        let aliceName = try await aliceHasANote(server)
        return (server.database(for: "bob"), RecordZone.ID(zoneName: "Notes", ownerName: aliceName))
    }

    /// Alice's note is as ``aliceHasANote(_:)`` left it: nothing bob did reached it.
    static func expectAlicesNoteUnchanged(
        _ server: SyncServer, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let alices = try await server.database(for: "alice").fetchZoneChanges(zoneID: notes, since: nil)
        #expect(alices.modifications.map { $0.record["title"] } == [.string("alice's")], sourceLocation: sourceLocation)
    }

    static func note(_ name: String, _ title: String, in zone: RecordZone.ID = notes) -> Record {
        var record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone))
        record["title"] = .string(title)
        return record
    }

    /// The end of every log of alice and bob: equal before and after means nothing was written.
    static func ends(_ server: SyncServer) throws -> [LogOffset] {
        let users: [UserID] = ["alice", "bob"]
        return try users.flatMap { user in
            try [DatabaseScope.private, .shared].map { try server.admin.log(of: user, scope: $0).lastOffset }
        }
    }

    /// The owner names that are not bob's: alice's user record name, a user that does not
    /// exist, and near misses of the default owner.
    static func foreignOwners(_ server: SyncServer) throws -> [String] {
        [
            try server.userRecordID(for: "alice").recordName, "_user999", "someone-else", "__defaultowner__",
            "__defaultOwner__ ",
        ]
    }

    /// The refusal of a write naming another owner's zone: invalidArguments naming the zone and
    /// the owner.
    static func expectRefusedWrite(
        _ error: SyncError?, _ zoneID: RecordZone.ID, item: SyncError.ItemID,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(error?.code == .invalidArguments, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(error?.item == item, sourceLocation: sourceLocation)
        #expect(error?.message.contains(zoneID.description) == true, sourceLocation: sourceLocation)
        #expect(error?.description.contains(zoneID.ownerName) == true, sourceLocation: sourceLocation)
    }

    // F127 F138 F147: bob cannot create a zone of another owner in his private database, alone
    // or next to a zone of his own; nothing is written for the refused zones.
    @Test("F127 F138 saving a zone of another owner in a private database gets invalidArguments, writes nothing")
    func zoneSaveOfAnotherOwner() async throws {
        try await withServer { server, _ in
            _ = try await Self.aliceHasANote(server)
            let bob = server.database(for: "bob", device: "laptop")
            for owner in try Self.foreignOwners(server) {
                let foreign = RecordZone.ID(zoneName: "Notes", ownerName: owner)
                let before = try Self.ends(server)
                let response = try await bob.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: foreign)]))
                Self.expectRefusedWrite(failure(response.saveResults[foreign]), foreign, item: .zone(foreign))
                #expect(response.saveResults.count == 1)
                #expect(try Self.ends(server) == before, "owner \(owner)")
            }
            // Next to a zone of bob's own: his zone is created, the other refused.
            let foreign = RecordZone.ID(zoneName: "Notes", ownerName: try server.userRecordID(for: "alice").recordName)
            let bobs = RecordZone.ID(zoneName: "BobsNotes")
            let mixed = try await bob.modifyZones(
                ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: foreign), RecordZone(zoneID: bobs)]))
            #expect(try mixed.saveResults[bobs]?.get().zoneID == bobs)
            Self.expectRefusedWrite(failure(mixed.saveResults[foreign]), foreign, item: .zone(foreign))
            #expect(Set(try await bob.fetchAllZones().map(\.zoneID)) == [.default, bobs])
        }
    }

    // F138 F156: deleting alice's zone by its ID from bob's private database is refused, and
    // alice's zone and records stay.
    @Test("F138 deleting a zone of another owner in a private database gets invalidArguments; the owner's zone stays")
    func zoneDeleteOfAnotherOwner() async throws {
        try await withServer { server, _ in
            let (bob, alicesNotes) = try await Self.bobAndAlicesNotes(server)
            let before = try Self.ends(server)
            let response = try await bob.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [alicesNotes]))
            Self.expectRefusedWrite(failure(response.deleteResults[alicesNotes]), alicesNotes, item: .zone(alicesNotes))
            #expect(try Self.ends(server) == before)
            try await Self.expectAlicesNoteUnchanged(server)
        }
    }

    // F138 F148: record saves and deletions in another owner's zone fail alone with
    // invalidArguments; bob's own records in the same request are saved; a request refused
    // whole writes nothing, not even its request ID (F160).
    @Test(
        "F138 records in a zone of another owner get invalidArguments per item; a request refused whole writes nothing")
    func recordWritesInAnotherOwnersZone() async throws {
        try await withServer { server, _ in
            let (aliceName, bob) = try await Self.aliceAndBobHaveNotes(server)
            for owner in try Self.foreignOwners(server) {
                for zoneName in ["Notes", RecordZone.ID.defaultZoneName] {
                    let foreign = RecordZone.ID(zoneName: zoneName, ownerName: owner)
                    let saved = Record.ID(recordName: "secret", zoneID: foreign)
                    let deleted = Record.ID(recordName: "other", zoneID: foreign)
                    let before = try Self.ends(server)
                    let response = try await bob.modifyRecords(
                        ModifyRecordsRequest(
                            recordsToSave: [Self.note("secret", "bob was here", in: foreign)],
                            recordIDsToDelete: [deleted],
                            savePolicy: .allKeys, requestID: RequestID("refused-\(owner)-\(zoneName)")))
                    Self.expectRefusedWrite(failure(response.saveResults[saved]), foreign, item: .record(saved))
                    Self.expectRefusedWrite(failure(response.deleteResults[deleted]), foreign, item: .record(deleted))
                    #expect(
                        failure(response.saveResults[saved])?.requestID == RequestID("refused-\(owner)-\(zoneName)"))
                    #expect(try Self.ends(server) == before, "owner \(owner), zone \(zoneName)")
                }
            }
            // Atomically, next to bob's own records: his are saved, the foreign one fails alone.
            let alicesNotes = RecordZone.ID(zoneName: "Notes", ownerName: aliceName)
            let foreignID = Record.ID(recordName: "secret", zoneID: alicesNotes)
            let bobsID = Record.ID(recordName: "mine", zoneID: Self.notes)
            let bobsInbox = Record.ID(recordName: "inbox")
            let aliceBefore = try server.admin.log(of: "alice").lastOffset
            let mixed = try await bob.modifyRecords(
                ModifyRecordsRequest(
                    recordsToSave: [
                        Self.note("secret", "bob", in: alicesNotes), Self.note("mine", "bob's"),
                        Self.note("inbox", "bob's", in: .default),
                    ],
                    atomically: true))
            Self.expectRefusedWrite(failure(mixed.saveResults[foreignID]), alicesNotes, item: .record(foreignID))
            #expect(try mixed.saveResults[bobsID]?.get()["title"] == .string("bob's"))
            #expect(try mixed.saveResults[bobsInbox]?.get().recordID == bobsInbox)
            #expect(try server.admin.log(of: "alice").lastOffset == aliceBefore)
            try await Self.expectAlicesNoteUnchanged(server)
        }
    }

    // F138 F151: the request's limits hold over the request as sent: items in another owner's
    // zone count, so leaving them out cannot bring an over-limit request under the limit.
    @Test("F138 a request over the item limit gets limitExceeded even when one of its items is in another owner's zone")
    func limitsCountForeignItems() async throws {
        try await withServer { server, _ in
            let (aliceName, bob) = try await Self.aliceAndBobHaveNotes(server)
            let foreign = Self.note("secret", "bob", in: RecordZone.ID(zoneName: "Notes", ownerName: aliceName))
            let own = (0..<Limits.maxItemsPerRequest).map { Self.note("n\($0)", "bob's") }
            let before = try Self.ends(server)
            let error = await #expect(throws: SyncError.self) {
                _ = try await bob.modifyRecords(ModifyRecordsRequest(recordsToSave: own + [foreign]))
            }
            #expect(error?.code == .limitExceeded, "\(String(describing: error))")
            #expect(try Self.ends(server) == before)
        }
    }

    // F138 F156: reads of another owner's zone in a private database get zoneNotFound, word for
    // word the answer for a zone nobody has: whether alice has the zone does not show.
    @Test("F138 reading a zone of another owner gets zoneNotFound, the same whether or not the owner has it")
    func readsOfAnotherOwnersZone() async throws {
        try await withServer { server, _ in
            let aliceName = try await Self.aliceHasANote(server)
            let bob = server.database(for: "bob")
            let before = try Self.ends(server)
            var messages: [String: [String]] = [:]
            for zoneName in ["Notes", "Nothing"] {
                let zone = RecordZone.ID(zoneName: zoneName, ownerName: aliceName)
                let fetched = failure(try await bob.fetchZones(FetchZonesRequest(zoneIDs: [zone])).results[zone])
                #expect(fetched?.code == .zoneNotFound)
                #expect(fetched?.item == .zone(zone))
                let changes = await #expect(throws: SyncError.self) {
                    _ = try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone))
                }
                #expect(changes?.code == .zoneNotFound)
                messages[zoneName] = [fetched?.message ?? "", changes?.message ?? ""].map {
                    $0.replacingOccurrences(of: zoneName, with: "ZONE")
                }
            }
            #expect(messages["Notes"] == messages["Nothing"])
            #expect(try Self.ends(server) == before)
        }
    }

    // F116 F138: a zone subscription to another owner's zone is refused and writes nothing.
    @Test("F138 a zone subscription to a zone of another owner gets invalidArguments, writes nothing")
    func subscriptionToAnotherOwnersZone() async throws {
        try await withServer { server, _ in
            let (bob, alicesNotes) = try await Self.bobAndAlicesNotes(server)
            let before = try Self.ends(server)
            let response = try await bob.modifySubscriptions(
                ModifySubscriptionsRequest(
                    subscriptionsToSave: [Subscription(subscriptionID: "spy", kind: .recordZone(alicesNotes))]))
            Self.expectRefusedWrite(failure(response.saveResults["spy"]), alicesNotes, item: .subscription("spy"))
            #expect(try Self.ends(server) == before)
            #expect(try await bob.allSubscriptions().isEmpty)
        }
    }

    // F127: the user's own record name as owner names the same zones as __defaultOwner__; the
    // server keeps __defaultOwner__ and answers each request in its own spelling.
    @Test("F127 the user's own record name as owner is the default owner")
    func ownRecordNameIsTheDefaultOwner() async throws {
        try await withServer { server, _ in
            let bob = server.database(for: "bob", device: "laptop")
            let bobName = try await bob.currentUserRecordID().recordName
            let spelt = RecordZone.ID(zoneName: "Notes", ownerName: bobName)

            // Creating the zone by either spelling creates one zone, kept under __defaultOwner__.
            let created = try await bob.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: spelt)]))
            #expect(try created.saveResults[spelt]?.get().zoneID == spelt)
            let afterCreation = try Self.ends(server)
            let again = try await bob.modifyZones(ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: Self.notes)]))
            #expect(try again.saveResults[Self.notes]?.get().capabilities == .customZoneDefault)
            #expect(try Self.ends(server) == afterCreation, "saving an existing zone again writes nothing (F147)")
            #expect(Set(try await bob.fetchAllZones().map(\.zoneID)) == [.default, Self.notes])
            #expect(try await bob.fetchZones(FetchZonesRequest(zoneIDs: [spelt])).results[spelt]?.get().zoneID == spelt)

            // A record saved by one spelling is the record of the other; answers use the request's.
            let savedID = Record.ID(recordName: "n1", zoneID: spelt)
            var record = Self.note("n1", "first", in: spelt)
            record["folder"] = .reference(Record.Reference(recordID: Record.ID(recordName: "n0", zoneID: spelt)))
            let saved = try await bob.modifyRecords(ModifyRecordsRequest(recordsToSave: [record]))
            let savedRecord = try #require(try saved.saveResults[savedID]?.get())
            #expect(savedRecord.recordID == savedID)
            #expect(
                savedRecord["folder"]
                    == .reference(Record.Reference(recordID: Record.ID(recordName: "n0", zoneID: spelt))))
            let byDefault = try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: Self.notes))
            #expect(byDefault.modifications.map(\.record.recordID) == [Record.ID(recordName: "n1", zoneID: Self.notes)])
            #expect(
                byDefault.modifications.first?.record["folder"]
                    == .reference(Record.Reference(recordID: Record.ID(recordName: "n0", zoneID: Self.notes))))
            let bySpelling = try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: spelt))
            #expect(bySpelling.zoneID == spelt)
            #expect(bySpelling.changeToken.zoneID == spelt)
            #expect(bySpelling.modifications.map(\.record.recordID) == [savedID])
            #expect(bySpelling.modifications.first?.record["folder"] == savedRecord["folder"])
            #expect(bySpelling.modifications.first?.record.recordChangeTag == savedRecord.recordChangeTag)

            // Editing through the other spelling passes the change-tag check (F145).
            var edit = try #require(byDefault.modifications.first).record
            edit["title"] = .string("second")
            let edited = try await bob.modifyRecords(ModifyRecordsRequest(recordsToSave: [edit]))
            #expect(try edited.saveResults[edit.recordID]?.get()["title"] == .string("second"))

            // A token of one spelling goes on with that spelling; a conflict names it too.
            let later = try await bob.fetchZoneChanges(
                FetchZoneChangesRequest(zoneID: spelt, since: bySpelling.changeToken))
            #expect(later.modifications.map(\.record.recordID) == [savedID])
            var stale = Self.note("n1", "stale", in: spelt)
            stale.applySystemFields(savedRecord.systemFields)
            let conflict = failure(
                try await bob.modifyRecords(ModifyRecordsRequest(recordsToSave: [stale])).saveResults[savedID])
            #expect(conflict?.code == .serverRecordChanged)
            #expect(conflict?.item == .record(savedID))
            #expect(conflict?.serverRecord?.recordID == savedID)
            #expect(conflict?.serverRecord?["title"] == .string("second"))

            // A zone subscription by the record name watches the zone kept under __defaultOwner__.
            let subscribed = try await bob.modifySubscriptions(
                ModifySubscriptionsRequest(
                    subscriptionsToSave: [Subscription(subscriptionID: "notes", kind: .recordZone(spelt))]))
            #expect(try subscribed.saveResults["notes"]?.get().kind == .recordZone(spelt))
            #expect(try await bob.allSubscriptions().map(\.kind) == [.recordZone(Self.notes)])

            // Both spellings of one item in one request name it twice: refused whole, nothing written.
            let beforeTwice = try Self.ends(server)
            let twice = await #expect(throws: SyncError.self) {
                _ = try await bob.modifyRecords(
                    ModifyRecordsRequest(
                        recordsToSave: [Self.note("n2", "a"), Self.note("n2", "b", in: spelt)]))
            }
            #expect(twice?.code == .invalidArguments)
            let twiceZones = await #expect(throws: SyncError.self) {
                _ = try await bob.modifyZones(
                    ModifyZonesRequest(zonesToSave: [RecordZone(zoneID: spelt)], zoneIDsToDelete: [Self.notes]))
            }
            #expect(twiceZones?.code == .invalidArguments)
            #expect(try Self.ends(server) == beforeTwice)

            // The default zone too; then the zone is deleted by its spelling (F149).
            let inbox = Record.ID(
                recordName: "inbox", zoneID: RecordZone.ID(zoneName: RecordZone.ID.defaultZoneName, ownerName: bobName))
            let inInbox = try await bob.modifyRecords(
                ModifyRecordsRequest(recordsToSave: [Self.note("inbox", "x", in: inbox.zoneID)]))
            #expect(try inInbox.saveResults[inbox]?.get().recordID == inbox)
            let fromDefault = try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: .default))
            #expect(fromDefault.modifications.map(\.record.recordID) == [Record.ID(recordName: "inbox")])
            let deleted = try await bob.modifyZones(ModifyZonesRequest(zoneIDsToDelete: [spelt]))
            #expect(throws: Never.self) { try deleted.deleteResults[spelt]?.get() }
            #expect(Set(try await bob.fetchAllZones().map(\.zoneID)) == [.default])
            let gone = await #expect(throws: SyncError.self) {
                _ = try await bob.fetchZoneChanges(FetchZoneChangesRequest(zoneID: spelt))
            }
            #expect(gone?.code == .zoneNotFound)
            #expect(gone?.item == .zone(spelt))
        }
    }

    // F120 F138 F147: bob's shared database reaches nothing of alice's: reads get zoneNotFound,
    // identical whether or not alice has the zone; zone saves and deletions get badDatabase;
    // record writes get zoneNotFound; nothing is written to alice's logs.
    @Test("F120 F138 the shared database reaches no zone of another user's")
    func sharedDatabaseReachesNothing() async throws {
        try await withServer { server, _ in
            let aliceName = try await Self.aliceHasANote(server)
            let bobShared = server.database(for: "bob", scope: .shared, device: "laptop")
            let alicesEnds = { () throws -> [LogOffset] in
                try [DatabaseScope.private, .shared].map { try server.admin.log(of: "alice", scope: $0).lastOffset }
            }
            let before = try alicesEnds()
            var messages: [String: [String]] = [:]
            for zoneName in ["Notes", "Nothing"] {
                for owner in [aliceName, RecordZone.ID.defaultOwnerName] {
                    let zone = RecordZone.ID(zoneName: zoneName, ownerName: owner)
                    let read = await #expect(throws: SyncError.self) {
                        _ = try await bobShared.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zone))
                    }
                    #expect(read?.code == .zoneNotFound)
                    let fetched = failure(
                        try await bobShared.fetchZones(FetchZonesRequest(zoneIDs: [zone])).results[zone])
                    #expect(fetched?.code == .zoneNotFound)
                    messages["\(zoneName) \(owner)"] = [read?.message ?? "", fetched?.message ?? ""].map {
                        $0.replacingOccurrences(of: zoneName, with: "ZONE")
                    }

                    let zones = try await bobShared.modifyZones(
                        ModifyZonesRequest(
                            zonesToSave: [RecordZone(zoneID: zone)],
                            zoneIDsToDelete: [RecordZone.ID(zoneName: "Other", ownerName: owner)]))
                    #expect(failure(zones.saveResults[zone])?.code == .badDatabase)
                    #expect(
                        failure(zones.deleteResults[RecordZone.ID(zoneName: "Other", ownerName: owner)])?.code
                            == .badDatabase)
                    let recordID = Record.ID(recordName: "secret", zoneID: zone)
                    let records = try await bobShared.modifyRecords(
                        ModifyRecordsRequest(
                            recordsToSave: [Self.note("secret", "bob", in: zone)],
                            recordIDsToDelete: [Record.ID(recordName: "x", zoneID: zone)],
                            savePolicy: .allKeys))
                    #expect(failure(records.saveResults[recordID])?.code == .zoneNotFound)
                    #expect(
                        failure(records.deleteResults[Record.ID(recordName: "x", zoneID: zone)])?.code == .zoneNotFound)
                    let subscription = try await bobShared.modifySubscriptions(
                        ModifySubscriptionsRequest(
                            subscriptionsToSave: [Subscription(subscriptionID: "spy", kind: .recordZone(zone))]))
                    #expect(failure(subscription.saveResults["spy"])?.code == .invalidArguments)  // F116
                }
            }
            #expect(messages["Notes \(aliceName)"] == messages["Nothing \(aliceName)"])
            #expect(
                messages["Notes \(RecordZone.ID.defaultOwnerName)"]
                    == messages["Nothing \(RecordZone.ID.defaultOwnerName)"])
            #expect(try alicesEnds() == before)
            #expect(try server.admin.log(of: "bob", scope: .shared).lastOffset == LogOffset(rawValue: 0))
            #expect(try await bobShared.fetchAllZones().isEmpty)
            #expect(try await bobShared.fetchDatabaseChanges(FetchDatabaseChangesRequest()).modifications.isEmpty)
            try await Self.expectAlicesNoteUnchanged(server)
        }
    }
}

/// The error of a failed result, or `nil` for a success or no result.
private func failure<T>(_ result: Result<T, SyncError>?) -> SyncError? {
    if case .failure(let error)? = result { error } else { nil }
}
