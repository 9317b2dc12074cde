import Foundation
import LogSyncServer
import SyncModel
import Synchronization

/// One participant's sharing lock held while another participant accepts (F119, F120): the
/// scenario of `SharingLockTests` on LMDB and of `PostgresSharingLockTests` across two nodes.
/// Alice shares her zone `Notes` with bob, dave his with carol: two owners, two participants,
/// nothing in common.
public struct SharingLockScenario: Sendable {
    /// Each participant's share URL.
    public let urls: [UserID: URL]

    /// Registers bob and carol on `owner` and makes alice's and dave's shares.
    public init(owner: SyncServer) async throws {
        var urls: [UserID: URL] = [:]
        for (sharer, participant) in [("alice", "bob"), ("dave", "carol")] as [(UserID, UserID)] {
            try owner.registerUser(participant, emailAddress: "\(participant.rawValue)@example.com")
            let database = owner.database(for: sharer, device: "phone")
            _ = try await database.modifyZones(saving: [RecordZone(zoneName: "Notes")], deleting: [])
            var share = Share(recordZoneID: RecordZone.ID(zoneName: "Notes"))
            share.addParticipant(
                Share.Participant(emailAddress: "\(participant.rawValue)@example.com", permission: .readWrite))
            let saved = try await database.modifyRecords(saving: [share.record], deleting: [])
            guard let record = try saved.saveResults[share.recordID]?.get(), let url = try Share(record: record).url
            else {
                throw ScenarioError("\(sharer)'s share was not saved with a URL")
            }
            urls[participant] = url
        }
        self.urls = urls
    }

    /// Accepts their share as `user` through `server`; whether it came back accepted.
    public func accept(as user: UserID, through server: SyncServer) async throws -> Bool {
        guard let url = urls[user] else { throw ScenarioError("no share for \(user)") }
        let response = try await server.database(for: user, scope: .shared, device: "phone")
            .acceptShares(AcceptSharesRequest(shareURLs: [url]))
        return (try? response.results[url]?.get()) != nil
    }

    /// Holds the lock `lockName` on `storage` on a thread of its own until `body` returns (or 120
    /// seconds pass, so that a regression fails rather than hangs); whether `body` returned while
    /// the lock was still held. No wait here is unbounded and none blocks a thread of Swift's
    /// pool: the thread holding the lock says when it has it, or that it could not take it.
    public static func holding(
        _ lockName: String, on storage: any ServerStorage, while body: () async throws -> Void
    ) async throws -> Bool {
        let done = DispatchSemaphore(value: 0)
        let taken = OneShot<Bool>()
        let holder = Task {
            await withCheckedContinuation { (released: CheckedContinuation<Bool, Never>) in
                Thread {
                    var heldThroughout = false
                    do {
                        try storage.withExclusiveLock(lockName) {
                            taken.set(true)
                            heldThroughout = done.wait(timeout: .now() + 120) == .success
                        }
                    } catch {}
                    taken.set(false)
                    released.resume(returning: heldThroughout)
                }.start()
            }
        }
        guard await taken.value else {
            _ = await holder.value
            throw ScenarioError("the lock \(lockName) could not be taken")
        }
        do {
            try await body()
        } catch {
            done.signal()
            _ = await holder.value
            throw error
        }
        done.signal()
        return await holder.value
    }
}

/// A value set once, from any thread, and awaited; later sets are ignored.
final class OneShot<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, waiting: [CheckedContinuation<Value, Never>])>((nil, []))

    func set(_ value: Value) {
        let waiting = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: value) }
    }

    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let value = state.withLock { state -> Value? in
                    if state.value == nil { state.waiting.append(continuation) }
                    return state.value
                }
                if let value { continuation.resume(returning: value) }
            }
        }
    }
}

/// A scenario that could not be set up.
public struct ScenarioError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
