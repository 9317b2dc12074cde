import Foundation
import LogSyncServer
import SyncModel
import Testing

/// Push hints (F112–F114, F117, F154).
///
/// No test sleeps: a test that expects a hint awaits it (bounded by the time limit), and a test
/// that expects *no* hint for a commit makes a later commit that must be hinted and checks the
/// first hint to arrive is that later one. A listener is opened before the commits it observes,
/// and drains the server's stream as hints arrive (see ``HintListener``), so a wrong hint is not
/// coalesced away behind the right one.
@Suite("Push hints (F112–F114, F154)", .timeLimit(.minutes(10)))
struct PushTests {
    // F113, F154, F117: a commit by one device sends a hint to the user's other subscribed
    // device; the hint is only a hint (scope, subscription, zone, token), and the fetch it
    // prompts returns the change.
    @Test("F113 F154 a commit hints the user's other subscribed devices", arguments: Harnesses.all)
    func commitHintsOtherDevices(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await laptop.createZone("Notes")
            try await phone.subscribe()
            let start = try await phone.fetchDatabase().token
            let hints = await phone.listen()

            try await laptop.save(newRecord("n1", ["title": "from the laptop"]))
            let end = try server.currentToken(of: "alice")

            let received = try await hints.next()
            #expect(received.databaseScope == .private)
            if let subscriptionID = received.subscriptionID { #expect(subscriptionID == "engine") }
            if let zone = received.zoneID { #expect(zone == zoneID("Notes")) }
            if let token = received.changeToken { #expect(token == end) }
            let changes = try await phone.fetchDatabase(since: start)
            #expect(changes.netModified == [zoneID("Notes")])
            #expect(try await phone.fetchZone("Notes").records[recordID("n1")]?["title"] == "from the laptop")
        }
    }

    // F113: many writes may be coalesced into fewer hints, but at least one arrives, and the
    // fetch it prompts returns every change.
    @Test("F113 many writes give at least one hint and the fetch gets everything", arguments: Harnesses.all)
    func manyWritesOneFetch(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            try await laptop.createZone("Notes")
            try await phone.subscribe()
            let start = try await phone.fetchZone("Notes").token
            let hints = await phone.listen()

            for index in 0..<25 {
                try await laptop.save(newRecord("n\(index)", ["i": .int64(Int64(index))]))
            }

            _ = try await hints.next()
            let fetch = try await phone.fetchZone("Notes", since: start)
            #expect(fetch.records.count == 25)
            #expect(Set(fetch.records.keys) == Set((0..<25).map { recordID("n\($0)") }))
        }
    }

    // F114: the device that made a commit gets no hint for it. Laptop writes to Inbox, then the
    // phone writes to Archive: the laptop's first hint is the phone's commit, and the phone's
    // first hint is the laptop's.
    @Test("F114 the originating device is not hinted", arguments: Harnesses.all)
    func originatorExcluded(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await phone.createZone("Inbox")
            try await phone.createZone("Archive")
            try await phone.subscribe()
            try await laptop.subscribe()
            let phoneHints = await phone.listen()
            let laptopHints = await laptop.listen()

            try await laptop.save(newRecord("l1", in: "Inbox"))
            let laptopCommit = try server.currentToken(of: "alice")
            await laptopHints.settle()
            await phoneHints.settle()
            try await phone.save(newRecord("p1", in: "Archive"))
            let phoneCommit = try server.currentToken(of: "alice")

            try await laptopHints.expectNext(isFor: phoneCommit, in: "Archive", "the phone's commit")
            try await phoneHints.expectNext(isFor: laptopCommit, in: "Inbox", "the laptop's commit")
        }
    }

    // F112: a write in the default zone produces no hint. The default-zone write comes first and
    // a custom-zone write second; the first hint must be the custom-zone one.
    @Test("F112 default-zone writes produce no push", arguments: Harnesses.all)
    func defaultZoneNoPush(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await laptop.createZone("Notes")
            try await phone.subscribe()
            let hints = await phone.listen()

            try await laptop.save(newRecord(Record.ID(recordName: "d1"), ["title": "default zone"]))
            await hints.settle()
            try await laptop.delete(Record.ID(recordName: "d1"))
            await hints.settle()
            try await laptop.save(newRecord("n1"))
            let customCommit = try server.currentToken(of: "alice")

            let first = try await hints.expectNext(isFor: customCommit, in: "Notes", "the custom-zone commit")
            #expect(first.zoneID != .default)
        }
    }

    // F154, F138: hints go to the devices of the user whose database changed, never to another
    // user's devices.
    @Test("F154 another user's commits are not hinted", arguments: Harnesses.all)
    func otherUsersNotHinted(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let bobPhone = try await server.device("bob", "phone")
            let bobLaptop = try await server.device("bob", "laptop")
            try await alice.createZone("Notes")
            for name in ["Filler1", "Filler2", "Journal"] { try await bobLaptop.createZone(name) }
            try await alice.subscribe()
            try await bobPhone.subscribe()
            let hints = await bobPhone.listen()

            try await alice.save(newRecord("a1"))
            await hints.settle()
            try await bobLaptop.save(newRecord("b1", in: "Journal"))
            let bobCommit = try server.currentToken(of: "bob")
            #expect(bobCommit != (try server.currentToken(of: "alice")), "the test needs distinct tokens")

            try await hints.expectNext(isFor: bobCommit, in: "Journal", "bob's commit")
        }
    }

    // F154, F111: hints go only to databases with a subscription. With none, a commit is not
    // hinted; once a database subscription is saved, the next commit is; once it is deleted,
    // commits are not hinted again.
    @Test("F154 only subscribed databases are hinted", arguments: Harnesses.all)
    func onlySubscribedDatabases(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await laptop.createZone("Notes")
            let hints = await phone.listen()
            /// After a commit that must not be hinted, the phone subscribes: the next commit is hinted.
            func expectHintedAfterSubscribing(unhinted: String, hinted: String, _ what: String) async throws {
                try await laptop.save(newRecord(unhinted))
                await hints.settle()
                try await phone.subscribe("engine")
                try await laptop.save(newRecord(hinted))
                try await hints.expectNext(isFor: try server.currentToken(of: "alice"), in: "Notes", what)
            }

            try await expectHintedAfterSubscribing(
                unhinted: "unsubscribed", hinted: "subscribed", "the first commit after subscribing")

            let deletion = try await phone.database.modifySubscriptions(saving: [], deleting: ["engine"])
            expectSuccess(deletion.deleteResults["engine"])
            await hints.settle()
            try await expectHintedAfterSubscribing(
                unhinted: "unsubscribed-again", hinted: "resubscribed", "the first commit after subscribing again")
        }
    }

    // F154, F116: a zone subscription is hinted for commits in its zone only.
    @Test("F154 a zone subscription is hinted for its zone only", arguments: Harnesses.all)
    func zoneSubscriptionScope(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { server, phone, laptop in
            try await laptop.createZone("Notes")
            try await laptop.createZone("Photos")
            let subscription = Subscription(subscriptionID: "notes", kind: .recordZone(zoneID("Notes")))
            expectSuccess(
                try await phone.database.modifySubscriptions(saving: [subscription], deleting: [])
                    .saveResults["notes"])
            let hints = await phone.listen()

            try await laptop.save(newRecord("p1", in: "Photos"))
            await hints.settle()
            try await laptop.save(newRecord("n1", in: "Notes"))
            let notesCommit = try server.currentToken(of: "alice")

            let first = try await hints.expectNext(isFor: notesCommit, in: "Notes", "the commit in the subscribed zone")
            if let subscriptionID = first.subscriptionID { #expect(subscriptionID == "notes") }
        }
    }
}
