import Foundation
import SyncModel
import Testing

@testable import LogSyncServer

/// The push hub off the commit's path: publishing queues, one delivery task hands hints on, and
/// nothing grows with a listener that does not keep up (F113, F154; Docs/Architecture.md).
@Suite("The push hub's queue")
struct PushHubTests {
    static let key = PushHub.Key(user: "alice", scope: .private)

    static func hint(_ offset: UInt64, zone: String? = "Notes", subscription: String? = "engine") -> PushHint {
        PushHint(
            databaseScope: .private, subscriptionID: subscription.map { Subscription.ID($0) },
            zoneID: zone.map { RecordZone.ID(zoneName: $0) },
            changeToken: DatabaseChangeToken(offset: ChangeOffset(rawValue: offset)))
    }

    /// Waits until the hub has handed every queued notice on (a condition, not a time).
    static func delivered(_ hub: PushHub) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let state = hub.queueState
            if state.waiting == 0, !state.delivering { return }
            guard ContinuousClock.now < deadline else { throw HubNotDelivered() }
            await Task.yield()
        }
    }

    @Test("F113 F154 a phone that takes no hint while the laptop commits 1,000 times holds one: the newest")
    func slowListenerHoldsOne() async throws {
        let hub = PushHub()
        let phone = hub.subscribe(Self.key, device: "phone", receivesOwnChanges: false)
        for offset in 1...1_000 { hub.publish(Self.hint(UInt64(offset)), to: Self.key, from: "laptop") }
        try await Self.delivered(hub)
        var hints = phone.makeAsyncIterator()
        #expect(await hints.next() == Self.hint(1_000))
        // Nothing else was held: the next hint is the next commit's.
        hub.publish(Self.hint(1_001), to: Self.key, from: "laptop")
        #expect(await hints.next() == Self.hint(1_001))
    }

    @Test("F113 F115 hints of two zones coalesced for a phone that took neither become one that names no zone")
    func coalescedZonesFetchEverything() async throws {
        let hub = PushHub()
        let phone = hub.subscribe(Self.key, device: "phone", receivesOwnChanges: false)
        hub.publish(Self.hint(7, zone: "Inbox", subscription: "inbox"), to: Self.key, from: "laptop")
        hub.publish(Self.hint(8, zone: "Archive", subscription: "archive"), to: Self.key, from: "laptop")
        try await Self.delivered(hub)
        var hints = phone.makeAsyncIterator()
        #expect(await hints.next() == Self.hint(8, zone: nil, subscription: nil))
    }

    @Test("F114 F154 through the queue: the laptop's commits reach the phone, not the laptop, in order")
    func originAndOrder() async throws {
        let hub = PushHub()
        let phone = hub.subscribe(Self.key, device: "phone", receivesOwnChanges: false)
        let laptop = hub.subscribe(Self.key, device: "laptop", receivesOwnChanges: false)
        var phoneHints = phone.makeAsyncIterator()
        var laptopHints = laptop.makeAsyncIterator()
        for offset in 1...20 {
            hub.publish(Self.hint(UInt64(offset)), to: Self.key, from: "laptop")
            #expect(await phoneHints.next() == Self.hint(UInt64(offset)))
        }
        // The laptop's first hint is the phone's commit, after the 20 of its own.
        hub.publish(Self.hint(21), to: Self.key, from: "phone")
        #expect(await laptopHints.next() == Self.hint(21))
    }

    @Test("F154 10,000 listeners of 1,000 users: each commit reaches its user's 9 other devices")
    func manyListeners() async throws {
        let hub = PushHub()
        var streams: [[AsyncStream<PushHint>]] = []
        for user in 0..<1_000 {
            let key = PushHub.Key(user: UserID(rawValue: "u\(user)"), scope: .private)
            streams.append(
                (0..<10).map { hub.subscribe(key, device: DeviceID(rawValue: "d\($0)"), receivesOwnChanges: false) })
        }
        #expect(hub.listenerCount == 10_000)
        for user in stride(from: 0, to: 1_000, by: 10) {
            hub.publish(
                Self.hint(UInt64(user + 1)), to: PushHub.Key(user: UserID(rawValue: "u\(user)"), scope: .private),
                from: "d0")
        }
        for user in stride(from: 0, to: 1_000, by: 10) {
            for device in 1..<10 {
                var hints = streams[user][device].makeAsyncIterator()
                #expect(await hints.next() == Self.hint(UInt64(user + 1)))
            }
        }
        try await Self.delivered(hub)
        hub.finishAll()
        var first = streams[0][0].makeAsyncIterator()
        #expect(await first.next() == nil)  // the writer got none of its own, and its stream ended
    }
}

struct HubNotDelivered: Error {}
