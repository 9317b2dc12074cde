import Foundation
import LogSyncServer
import SyncModel
import SyncTestKit
import Synchronization
import TemporaryDirectory
import Testing

@testable import LogSync
@testable import LogSyncTesting

/// `SimulatedAccount` alone: forwarding, the errors of each status, the signal on each change,
/// and push hints that follow the signed-in user.
@Suite("Accounts: SimulatedAccount")
struct SimulatedAccountTests {
    @Test(
        "Forwards to the signed-in user's database; throws notAuthenticated signed out, accountTemporarilyUnavailable when not ready"
    )
    func forwardingAndErrors() async throws {
        try await withServer { _, server in
            let account = SimulatedAccount<UserID>(databases: [
                "alice": server.database(for: "alice"), "bob": server.database(for: "bob"),
            ])
            #expect(account.databaseScope == .private)
            #expect(account.currentUser == nil)

            let signedOut = await #expect(throws: SyncError.self) { try await account.currentUserRecordID() }
            #expect(signedOut?.code == .notAuthenticated)
            let refused = await #expect(throws: SyncError.self) { try await account.fetchAllZones() }
            #expect(refused?.code == .notAuthenticated)
            #expect(account.requestsRefused == 1 && account.requestsForwarded == 0)

            account.signIn("alice")
            #expect(try await account.currentUserRecordID() == server.userRecordID(for: "alice"))
            _ = try await account.modifyZones(
                saving: [RecordZone(zoneID: RecordZone.ID(zoneName: "Notes"))], deleting: [])
            #expect(
                try await server.database(for: "alice").fetchAllZones().map(\.zoneID).filter { $0 != .default } == [
                    RecordZone.ID(zoneName: "Notes")
                ])

            account.switch(to: "bob")
            #expect(try await account.currentUserRecordID() == server.userRecordID(for: "bob"))
            #expect(
                try await account.fetchAllZones().map(\.zoneID).filter { $0 != .default }.isEmpty,
                "bob's database, not alice's")

            account.setTemporarilyUnavailable(true)
            #expect(account.currentUser == "bob" && account.isTemporarilyUnavailable)
            let notReady = await #expect(throws: SyncError.self) { try await account.currentUserRecordID() }
            #expect(notReady?.code == .accountTemporarilyUnavailable)
            await #expect(throws: SyncError.self) { try await account.fetchAllZones() }
            account.setTemporarilyUnavailable(false)
            #expect(try await account.currentUserRecordID() == server.userRecordID(for: "bob"))

            account.signOut()
            await #expect(throws: SyncError.self) { try await account.allSubscriptions() }
            #expect(account.requestsForwarded == 2)
            #expect(account.requestsRefused == 3)
            #expect(account.description == "SimulatedAccount(\(DatabaseScope.private), signed out)")
        }
    }

    @Test(
        "One account, several scopes: signing in on one view signs in the others; a user without a database gives badDatabase"
    )
    func scopesShareTheAccount() async throws {
        try await withServer { _, server in
            let account = SimulatedAccount<UserID>(signedIn: "alice") { user, scope in
                user == "nobody" ? nil : server.database(for: user, scope: scope)
            }
            let shared = account.database(for: .shared)
            #expect(shared.databaseScope == .shared)
            #expect(shared.currentUser == "alice")
            account.signOut()
            #expect(shared.currentUser == nil)
            shared.signIn("nobody")
            #expect(account.currentUser == "nobody")
            let error = await #expect(throws: SyncError.self) { try await account.fetchAllZones() }
            #expect(error?.code == .badDatabase)
        }
    }

    @Test("Each account change signals the conditions stream; the conditions are the ManualConditions'")
    func signalsChanges() async throws {
        let conditions = ManualConditions(SyncEngine.Conditions(networkAvailable: false))
        let account = SimulatedAccount<String>(conditions: conditions) { _, _ in nil }
        #expect(await account.currentConditions().networkAvailable == false)
        var changes = account.changes().makeAsyncIterator()
        account.signIn("alice")
        #expect(await changes.next() != nil)
        account.setTemporarilyUnavailable(true)
        #expect(await changes.next() != nil)
        account.switch(to: "bob")
        #expect(await changes.next() != nil)
        account.signOut()
        #expect(await changes.next() != nil)
    }

    @Test("Push hints follow the signed-in user: alice's, then bob's after a switch, none signed out")
    func pushHintsFollowTheUser() async throws {
        try await withServer { _, server in
            let account = SimulatedAccount<UserID>(signedIn: "alice") { user, scope in
                server.database(for: user, scope: scope, device: "phone")
            }
            let subscription = Subscription(subscriptionID: "sub", kind: .database)
            for user: UserID in ["alice", "bob"] {
                _ = try await server.database(for: user).modifySubscriptions(saving: [subscription], deleting: [])
            }
            func write(_ user: UserID, _ zone: String) async throws {
                _ = try await server.database(for: user, device: "laptop").modifyZones(
                    saving: [RecordZone(zoneID: RecordZone.ID(zoneName: zone))], deleting: [])
            }
            var hints = account.pushHints().makeAsyncIterator()

            try await write("alice", "A1")
            #expect(await hints.next()?.zoneID?.zoneName == "A1")

            account.switch(to: "bob")
            try await write("alice", "A2")  // no longer this device's account
            try await write("bob", "B1")
            #expect(await hints.next()?.zoneID?.zoneName == "B1")

            account.signOut()
            try await write("bob", "B2")
            account.signIn("alice")
            try await write("alice", "A3")
            #expect(await hints.next()?.zoneID?.zoneName == "A3", "nothing arrives from the signed-out time")
        }
    }
}

/// The simulation's link to the server answers every sharing operation the server has, so an app's
/// test that looks participants up through a simulated network reaches the server rather than the
/// default refusal of databases without sharing.
@Suite("Simulation: the simulated link's sharing operations")
struct SimulatedLinkSharingTests {
    @Test("fetchShareParticipants reaches the server through the simulated network")
    func participantsAreLookedUp() async throws {
        try await withTemporaryDirectory { directory in
            let network = try SimulatedNetwork(
                server: SyncServer.Configuration(directory: directory), seed: 1, rates: .none, devices: ["phone"],
                trace: SimulationTrace())
            try network.currentServer.registerUser("bob", emailAddress: "bob@example.com")
            let link = SimulatedLink(network: network, device: "phone", user: "alice")
            let known = UserIdentity.LookupInfo(emailAddress: "bob@example.com")
            let unknown = UserIdentity.LookupInfo(emailAddress: "nobody@example.com")
            let response = try await link.fetchShareParticipants([known, unknown])
            let bob = try #require(try response.results[known]?.get())
            #expect(bob.userIdentity.emailAddress == "bob@example.com" && bob.userIdentity.userRecordName != nil)
            #expect(throws: SyncError.self) { try response.results[unknown]?.get() }
        }
    }
}
