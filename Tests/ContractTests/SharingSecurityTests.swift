import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Attempts by users who may not read or write a shared zone: a stranger (eve), a participant
/// the owner removed (dan), a participant who left (frank), and a read-only participant (carol),
/// in process and over HTTP. Every attempt is refused with its documented code, and the owner's
/// database does not change (F119–F124; Docs/Protocol.md, "Sharing").
@Suite("Sharing security (F119–F124)", .timeLimit(.minutes(10)))
struct SharingSecurityTests {
    /// One attempt: who makes it, what it is, and the code it must be refused with.
    struct Attempt: Sendable {
        let user: UserID
        let what: String
        let code: SyncError.Code
        let run: @Sendable (Context) async throws -> SyncError?
    }

    /// What attempts work with.
    struct Context: Sendable {
        let notes: RecordZone.ID
        let unshared: RecordZone.ID
        let url: URL
        let shareID: Record.ID
        /// Each attacker's shared database and private database.
        let shared: [UserID: Device]
        let `private`: [UserID: Device]
        /// Zone tokens the removed and departed participants got while they were in.
        let oldZoneTokens: [UserID: ZoneChangeToken]
        /// n1 as a participant fetched it, with its tag.
        let n1: Record
        let share: Share

        func record(_ name: String, in zone: RecordZone.ID? = nil) -> Record.ID {
            Record.ID(recordName: name, zoneID: zone ?? notes)
        }
    }

    /// The attempts of a user who has no access to the zone (any more).
    static func outsider(_ user: UserID) -> [Attempt] {
        func attempt(
            _ what: String, _ code: SyncError.Code,
            _ run: @escaping @Sendable (Context, Device) async throws -> SyncError?
        ) -> Attempt {
            Attempt(user: user, what: what, code: code) { context in try await run(context, context.shared[user]!) }
        }
        var attempts = [
            attempt("fetch the shared zone's changes", .zoneNotFound) { c, d in
                try await thrown { try await d.fetchZone(c.notes) }
            },
            attempt("fetch an unshared zone's changes", .zoneNotFound) { c, d in
                try await thrown { try await d.fetchZone(c.unshared) }
            },
            attempt("fetch the shared zone", .zoneNotFound) { c, d in
                try await d.database.fetchZones([c.notes]).results[c.notes]?.failure
            },
            attempt("save a new record", .zoneNotFound) { c, d in
                try await d.attemptSave(newRecord(c.record("new")))?.failure
            },
            attempt("save n1 with changed keys", .zoneNotFound) { c, d in
                try await d.attemptSave(c.n1.setting(["title": "mine"]), savePolicy: .changedKeys)?.failure
            },
            attempt("delete n1", .zoneNotFound) { c, d in
                try await d.modify(deleting: [c.record("n1")]).deleteResults[c.record("n1")]?.failure
            },
            attempt("delete the share", .zoneNotFound) { c, d in
                try await d.modify(deleting: [c.shareID]).deleteResults[c.shareID]?.failure
            },
            attempt("save the share with themselves added", .zoneNotFound) { c, d in
                var share = c.share
                share.addParticipant(
                    Share.Participant(userRecordName: try await d.userRecordName(), permission: .readWrite))
                return try await d.attemptSave(share.record, savePolicy: .allKeys)?.failure
            },
            attempt("save into an unshared zone", .zoneNotFound) { c, d in
                try await d.attemptSave(newRecord(c.record("new", in: c.unshared)))?.failure
            },
            attempt("read the share's metadata", .unknownItem) { c, d in
                try await thrown { try await d.sharing.fetchShareMetadata(url: c.url) }
            },
            attempt("accept the share", .unknownItem) { c, d in try await d.attemptAccept(c.url)?.failure },
            attempt("save the shared zone in the shared database", .badDatabase) { c, d in
                try await d.attemptCreateZone(c.notes)?.failure
            },
            attempt("delete the shared zone in the shared database", .badDatabase) { c, d in
                try await d.attemptDeleteZone(c.notes)?.failure
            },
            attempt("subscribe to the shared zone", .invalidArguments) { c, d in
                let subscription = Subscription(subscriptionID: "spy", kind: .recordZone(c.notes))
                return try await d.database.modifySubscriptions(saving: [subscription], deleting: []).saveResults[
                    "spy"]?.failure
            },
            Attempt(user: user, what: "write the owner's zone through their private database", code: .invalidArguments)
            { c in
                try await c.private[user]!.attemptSave(newRecord(c.record("new")))?.failure
            },
            Attempt(user: user, what: "read the owner's zone through their private database", code: .zoneNotFound) {
                c in
                try await thrown { try await c.private[user]!.fetchZone(c.notes) }
            },
        ]
        if user != "eve" {
            attempts.append(
                attempt("fetch with a zone token from before", .zoneNotFound) { c, d in
                    try await thrown { try await d.fetchZone(c.notes, since: c.oldZoneTokens[user]) }
                })
        } else {
            for owner in ["__defaultOwner__", "_user01", "alice", "_user999"] {
                attempts.append(
                    attempt("fetch the zone named with owner \(owner)", .zoneNotFound) { c, d in
                        try await thrown {
                            try await d.fetchZone(RecordZone.ID(zoneName: c.notes.zoneName, ownerName: owner))
                        }
                    })
            }
        }
        return attempts
    }

    /// The attempts of a read-only participant to write.
    static let readOnly: [Attempt] = {
        func attempt(
            _ what: String, _ code: SyncError.Code,
            _ run: @escaping @Sendable (Context, Device) async throws -> SyncError?
        ) -> Attempt {
            Attempt(user: "carol", what: what, code: code) { context in try await run(context, context.shared["carol"]!)
            }
        }
        return [
            attempt("save a new record", .permissionFailure) { c, d in
                try await d.attemptSave(newRecord(c.record("new")))?.failure
            },
            attempt("save n1", .permissionFailure) { c, d in
                try await d.attemptSave(c.n1.setting(["title": "mine"]))?.failure
            },
            attempt("save n1 with all keys", .permissionFailure) { c, d in
                try await d.attemptSave(c.n1.setting(["title": "mine"]), savePolicy: .allKeys)?.failure
            },
            attempt("delete n1", .permissionFailure) { c, d in
                try await d.modify(deleting: [c.record("n1")]).deleteResults[c.record("n1")]?.failure
            },
            attempt("save the share with a read-write permission", .permissionFailure) { c, d in
                var share = c.share
                share.addParticipant(
                    Share.Participant(userRecordName: try await d.userRecordName(), permission: .readWrite))
                return try await d.attemptSave(share.record, savePolicy: .allKeys)?.failure
            },
            attempt("save two records atomically", .permissionFailure) { c, d in
                try await d.modify(saving: [newRecord(c.record("a")), newRecord(c.record("b"))]).saveResults[
                    c.record("a")]?.failure
            },
            attempt("save into an unshared zone", .zoneNotFound) { c, d in
                try await d.attemptSave(newRecord(c.record("new", in: c.unshared)))?.failure
            },
            attempt("delete the shared zone in the shared database", .badDatabase) { c, d in
                try await d.attemptDeleteZone(c.notes)?.failure
            },
            Attempt(user: "carol", what: "write the owner's zone through her private database", code: .invalidArguments)
            { c in
                try await c.private["carol"]!.attemptSave(newRecord(c.record("new")))?.failure
            },
        ]
    }()

    static let attempts: [Attempt] = outsider("eve") + outsider("dan") + outsider("frank") + readOnly

    @Test(
        "at least 50 attempts by outsiders, removed, departed and read-only participants: all refused, nothing changed",
        arguments: Harnesses.all)
    func everyAttemptRefused(harness: any ContractHarness) async throws {
        #expect(Self.attempts.count >= 50)
        try await withAttackedNotes(harness) { notes, context in
            let contents = try await notes.alice.fetchZone("Notes").records
            // Each attempt as a test sends it, then as an engine sends it: with a request ID, an
            // operation group and a client change token, which a refusal must not log anywhere.
            for engineLike in [false, true] {
                let context = engineLike ? context.likeAnEngine() : context
                for attempt in Self.attempts {
                    let before = try Self.logEnds(notes.server, sparing: attempt.user)
                    let error = try await attempt.run(context)
                    let how = "\(attempt.user) tried to \(attempt.what)\(engineLike ? " as an engine sends" : "")"
                    #expect(error?.code == attempt.code, "\(how): \(error.map { "\($0)" } ?? "it succeeded")")
                    let after = try Self.logEnds(notes.server, sparing: attempt.user)
                    for (database, end) in before where after[database] != end {
                        Issue.record("\(how): \(database) grew from \(end.offset) to \(after[database]!.offset)")
                    }
                }
            }
            #expect(try await notes.alice.fetchZone("Notes").records == contents)
            #expect(
                try await notes.alice.fetchZone("Private").records[recordID("p1", in: "Private")]?["secret"]
                    == "alice's")
        }
    }

    /// F160: every engine send carries a request ID, which the server logs with the request's
    /// outcome. A refused writer must not be able to make it log anything: 1,000 such requests by
    /// a stranger guessing owner names and 1,000 by a removed participant leave every other
    /// user's log as it was. In process on each store: the refusal is the server's (the attempts
    /// above show it over HTTP too).
    @Test(
        "2,000 refused writes with request IDs by a stranger and a removed participant write nothing anywhere",
        arguments: Harnesses.inProcess)
    func refusedWritesWriteNothing(harness: any ContractHarness) async throws {
        try await withAttackedNotes(harness) { notes, context in
            let eve = context.shared["eve"]!.likeAnEngine()
            let dan = context.shared["dan"]!.likeAnEngine()
            let guessed = (1...10).map {
                RecordZone.ID(zoneName: $0 % 2 == 0 ? "Notes" : "Contacts", ownerName: "_user\($0)")
            }
            for attacker in [eve, dan] {
                let before = try Self.logEnds(notes.server, sparing: attacker.user)
                for attempt in 0..<1000 {
                    let zone = attacker.user == "eve" ? guessed[attempt % guessed.count] : context.notes
                    let id = Record.ID(recordName: "r\(attempt % 7)", zoneID: zone)
                    let response = try await attacker.modify(
                        saving: attempt % 3 == 0 ? [] : [newRecord(id, ["title": "x"])],
                        deleting: attempt % 3 == 0 ? [id] : [])
                    let outcome =
                        attempt % 3 == 0 ? response.deleteResults[id]?.failure : response.saveResults[id]?.failure
                    #expect(
                        outcome?.code == .zoneNotFound,
                        "\(attacker.user)'s request \(attempt) to \(zone): \(String(describing: outcome))")
                }
                #expect(
                    try Self.logEnds(notes.server, sparing: attacker.user) == before,
                    "\(attacker.user)'s refused writes grew a log")
            }
        }
    }

    // F123, F135: a parent chain is at most `Limits.maxHierarchyDepth` ancestors long, for the
    // owner and participants alike; every record of a shared chain is shared, the deepest too,
    // and no share can be rooted anywhere in it, nor above it (alreadyShared).
    @Test(
        "F123 a parent chain is at most 1,000 ancestors deep; no second share anywhere in a shared one",
        arguments: Harnesses.all)
    func deepHierarchy(harness: any ContractHarness) async throws {
        let limit = Limits.maxHierarchyDepth
        try await withSharedFolders(
            harness, records: [("top", nil), ("r0", "top")], shares: [("r0", [("bob", .readWrite)])]
        ) { notes in
            let alice = notes.alice
            let bob = notes.participants["bob"]!
            // r0 has 1 ancestor (top); r<i> has i + 1. Alice saves r1…r<limit - 2>, bob the last.
            let chain = (1...(limit - 2)).map { child("r\($0)", of: "r\($0 - 1)") }
            for start in stride(from: 0, to: chain.count, by: Limits.maxItemsPerRequest) {
                try await alice.save(Array(chain[start..<min(start + Limits.maxItemsPerRequest, chain.count)]))
            }
            let last = "r\(limit - 1)"  // limit ancestors
            try await bob.save(child(last, of: "r\(limit - 2)", in: notes.zoneID))
            let visible = try await bob.fetchZone(notes.zoneID).records
            #expect(visible.count == limit + 1)  // r0…r<limit - 1> and the share
            #expect(visible[notes.recordID(last)] != nil)

            // One more ancestor is refused, whoever saves, naming the record and the limit.
            for (device, zone) in [(alice, zoneID("Notes")), (bob, notes.zoneID)] {
                let deeper = Record.ID(recordName: "too-deep", zoneID: zone)
                let error = expectFailure(
                    try await device.attemptSave(child("too-deep", of: last, in: zone)), .limitExceeded)
                #expect(error?.item == .record(deeper), "\(String(describing: error))")
                #expect(error?.message.contains("\"too-deep\"") == true, "\(String(describing: error))")
                #expect(error?.message.contains("1000") == true, "\(String(describing: error))")
            }
            // So is a move that would put a record's descendant past it; and a parent cycle.
            try await alice.save([child("s0", of: nil), child("s1", of: "s0")])
            var s0 = try #require(try await alice.fetchRecord(recordID("s0")))
            s0.parent = Record.Reference(recordID: recordID("r\(limit - 2)"))
            let moved = expectFailure(try await alice.attemptSave(s0), .limitExceeded)
            #expect(moved?.item == .record(recordID("s0")))
            var top = try #require(try await alice.fetchRecord(recordID("top")))
            top.parent = Record.Reference(recordID: recordID("r5"))
            expectFailure(try await alice.attemptSave(top), .invalidArguments)

            // No share rooted in the shared chain, at any depth, nor above it.
            for root in ["r1", "r500", last, "top"] {
                let share = Share(rootRecordID: recordID(root), shareID: recordID("\(root)-share"))
                let error = expectFailure(try await alice.attemptSave(share.record), .alreadyShared)
                #expect(error?.message.contains("r0-share") == true, "\(root): \(String(describing: error))")
            }
            #expect(try await alice.fetchRecord(recordID("\(last)-share")) == nil)
        }
    }

    /// Alice's `Notes` shared with bob (read-write), carol (read-only), dan (removed) and frank
    /// (who left), alice's unshared `Private`, and eve, a stranger: the context the attempts use.
    private func withAttackedNotes(
        _ harness: any ContractHarness, _ body: (SharedNotes, Context) async throws -> Void
    ) async throws {
        try await withSharedNotes(
            harness, [("bob", .readWrite), ("carol", .readOnly), ("dan", .readWrite), ("frank", .readWrite)]
        ) { notes in
            try await notes.alice.createZone("Private")
            try await notes.alice.save(newRecord("p1", in: "Private", ["secret": "alice's"]))
            let unshared = RecordZone.ID(zoneName: "Private", ownerName: notes.ownerName)
            var oldTokens: [UserID: ZoneChangeToken] = [:]
            for user in ["dan", "frank"] as [UserID] {
                oldTokens[user] = try await notes.participants[user]!.fetchZone(notes.zoneID).token
            }
            let n1 = try #require(
                try await notes.participants["bob"]!.fetchZone(notes.zoneID).records[notes.recordID("n1")])
            // Dan is removed; frank leaves.
            var share = notes.share
            share.removeParticipant(UserIdentity(userRecordName: try await notes.participants["dan"]!.userRecordName()))
            try await notes.alice.saveShare(share)
            try await notes.participants["frank"]!.delete(notes.shareID)
            let current = try Share(
                record: try #require(
                    try await notes.participants["bob"]!.fetchZone(notes.zoneID).records[notes.shareID]))

            var shared: [UserID: Device] = notes.participants
            shared["eve"] = try await notes.server.device("eve", "laptop", scope: .shared)
            var privates: [UserID: Device] = [:]
            for user in ["eve", "dan", "frank", "carol"] as [UserID] {
                privates[user] = try await notes.server.device(user, DeviceID("\(user.rawValue)-private"))
            }
            try await body(
                notes,
                Context(
                    notes: notes.zoneID, unshared: unshared, url: notes.url, shareID: notes.shareID, shared: shared,
                    private: privates, oldZoneTokens: oldTokens, n1: n1, share: current))
        }
    }

    /// The end of the private and shared database logs of every user but `attacker`, by database.
    private static func logEnds(_ server: TestServer, sparing attacker: UserID) throws -> [String: DatabaseChangeToken]
    {
        var ends: [String: DatabaseChangeToken] = [:]
        for user in ["alice", "bob", "carol", "dan", "frank", "eve"] as [UserID] where user != attacker {
            for scope in [DatabaseScope.private, .shared] {
                ends["\(user)'s \(scope) database"] = try server.currentToken(of: user, scope: scope)
            }
        }
        return ends
    }
}

extension SharingSecurityTests.Context {
    /// The same context, each device sending as an engine does.
    func likeAnEngine() -> Self {
        Self(
            notes: notes, unshared: unshared, url: url, shareID: shareID,
            shared: shared.mapValues { $0.likeAnEngine() },
            private: `private`.mapValues { $0.likeAnEngine() }, oldZoneTokens: oldZoneTokens, n1: n1, share: share)
    }
}

/// The `SyncError` `body` throws, or `nil` when it returns.
func thrown<R>(_ body: () async throws -> R) async throws -> SyncError? {
    do {
        _ = try await body()
        return nil
    } catch let error as SyncError {
        return error
    }
}

extension Result {
    /// The failure, or `nil` for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
