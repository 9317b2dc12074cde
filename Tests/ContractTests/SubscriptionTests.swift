import Foundation
import LogSyncServer
import SyncModel
import Testing

/// One case of F116: a kind of subscription saved in a database of some scope.
struct SubscriptionPlacement: Sendable, CustomStringConvertible {
    enum Kind: String, Sendable { case database, zone }
    let kind: Kind
    let scope: DatabaseScope
    var allowed: Bool {
        switch kind {
        case .database: scope == .private || scope == .shared
        case .zone: scope == .private
        }
    }
    var description: String { "\(kind.rawValue) subscription in the \(scope) database" }

    static let all: [SubscriptionPlacement] = [.database, .zone].flatMap { kind in
        DatabaseScope.allCases.map { SubscriptionPlacement(kind: kind, scope: $0) }
    }
}

/// Subscription storage (F155) and where each kind is allowed (F116).
@Suite("Subscriptions (F116, F155)")
struct SubscriptionTests {
    // F155, F111: saving the same subscription twice is idempotent: one subscription.
    @Test("F155 saving a subscription twice keeps one", arguments: Harnesses.all)
    func saveTwice(harness: any ContractHarness) async throws {
        try await withPhoneAndLaptop(harness) { _, phone, laptop in
            try await phone.subscribe("engine")
            try await laptop.subscribe("engine")
            let subscriptions = try await phone.database.allSubscriptions()
            #expect(subscriptions == [Subscription(subscriptionID: "engine", kind: .database)])
        }
    }

    // F155: subscriptions are stored per user and per database, and can be deleted.
    @Test("F155 subscriptions are per user and database, and deletable", arguments: Harnesses.all)
    func perUserAndDatabase(harness: any ContractHarness) async throws {
        try await withServer(harness) { server in
            let alice = try await server.device("alice", "phone")
            let aliceShared = try await server.device("alice", "phone", scope: .shared)
            let bob = try await server.device("bob", "phone")
            try await alice.createZone("Notes")
            try await alice.subscribe("engine")
            let zoneSubscription = Subscription(subscriptionID: "notes", kind: .recordZone(zoneID("Notes")))
            expectSuccess(
                try await alice.database.modifySubscriptions(saving: [zoneSubscription], deleting: [])
                    .saveResults["notes"])
            try await aliceShared.subscribe("shared-engine")

            #expect(
                Set(try await alice.database.allSubscriptions()) == [
                    Subscription(subscriptionID: "engine", kind: .database), zoneSubscription,
                ])
            #expect(
                try await aliceShared.database.allSubscriptions() == [Subscription(subscriptionID: "shared-engine")])
            #expect(try await bob.database.allSubscriptions().isEmpty)

            let response = try await alice.database.modifySubscriptions(saving: [], deleting: ["engine"])
            expectSuccess(response.deleteResults["engine"])
            #expect(try await alice.database.allSubscriptions() == [zoneSubscription])
        }
    }

    // F116: database subscriptions in the private and shared databases only, zone subscriptions
    // in the private database only; others are rejected per item and not stored.
    @Test("F116 where each kind of subscription is allowed", arguments: Harnesses.all, SubscriptionPlacement.all)
    func placement(harness: any ContractHarness, placement: SubscriptionPlacement) async throws {
        try await withServer(harness) { server in
            let owner = try await server.device("alice", "phone")
            try await owner.createZone("Notes")
            let device = try await server.device("alice", "phone", scope: placement.scope)
            let subscription =
                switch placement.kind {
                case .database: Subscription(subscriptionID: "sub", kind: .database)
                case .zone: Subscription(subscriptionID: "sub", kind: .recordZone(zoneID("Notes")))
                }
            let result = try await device.database.modifySubscriptions(saving: [subscription], deleting: [])
                .saveResults["sub"]
            if placement.allowed {
                #expect(expectSuccess(result) == subscription)
                #expect(try await device.database.allSubscriptions() == [subscription])
            } else {
                expectFailure(result, .invalidArguments)
                #expect(try await device.database.allSubscriptions().isEmpty)
            }
        }
    }
}
