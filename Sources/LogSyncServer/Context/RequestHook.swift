import SyncModel
import Synchronization

/// Runs before each request a server answers for a user, and may fail it: how tests and operators
/// make requests fail (F152). A production server runs none; ``ServerAdmin`` installs one for
/// ``ServerAdmin/failNextRequests(of:count:with:)``, and a test kit may install its own with
/// ``ServerAdmin/install(_:)``.
package protocol RequestHook: Sendable {
    /// Called before a request of `user` reaches its database: every database operation and
    /// asset transfer of any scope, but not the account query `currentUserRecordID`.
    ///
    /// - Throws: The error the request fails with; the request then does nothing.
    func beforeRequest(of user: UserID) throws(SyncError)
}

/// The request hooks a server runs, in the order they were installed; none until one is.
final class RequestHooks: Sendable {
    private let hooks = Mutex<[any RequestHook]>([])

    /// Adds `hook`, run after those installed before it.
    func install(_ hook: any RequestHook) {
        hooks.withLock { $0.append(hook) }
    }

    /// The installed hook of type `Hook`, installing `make()` first when there is none.
    func hook<Hook: RequestHook>(_ make: () -> Hook) -> Hook {
        hooks.withLock { hooks in
            if let installed = hooks.lazy.compactMap({ $0 as? Hook }).first { return installed }
            let made = make()
            hooks.append(made)
            return made
        }
    }

    /// Runs every hook before a request of `user`.
    ///
    /// - Throws: The first hook's error.
    func beforeRequest(of user: UserID) throws(SyncError) {
        let installed = hooks.withLock { $0 }
        for hook in installed { try hook.beforeRequest(of: user) }
    }
}

/// Failures queued per user, each failing one request (F152): the hook behind
/// ``ServerAdmin/failNextRequests(of:count:with:)``.
final class InjectedFailures: RequestHook {
    private let queued = Mutex<[UserID: [SyncError]]>([:])

    /// Queues `error` for the next `count` requests of `user`.
    func add(_ error: SyncError, count: Int, for user: UserID) {
        queued.withLock { $0[user, default: []] += Array(repeating: error, count: count) }
    }

    /// Throws the next failure queued for `user`, if any.
    func beforeRequest(of user: UserID) throws(SyncError) {
        let failure = queued.withLock { failures -> SyncError? in
            guard var queue = failures[user], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            failures[user] = queue.isEmpty ? nil : queue
            return first
        }
        if let failure { throw failure }
    }
}
