import Foundation
import LogStore
import SyncModel
import Synchronization

/// What ``SyncServer/databaseChanges()`` delivers.
public enum DatabaseChangeEvent: Sendable, Hashable {
    /// Databases that changed since the previous event, each once with its newest token.
    case changed([ChangedDatabase])
    /// Changes may have been lost on their way between server nodes (the storage's connection
    /// was lost and made again): a listener reads ``SyncServer/databaseCatalogue()`` again.
    case missed
}

extension SyncServer {
    /// Every database's commits from now on, on every node sharing this server's storage,
    /// coalesced per database (the newest token of each) while the listener is busy: the
    /// admin change stream (Docs/Protocol.md, "Admin change stream"). A commit changing records
    /// or zones is told whether or not a subscription covers it. The stream ends when the
    /// server shuts down, or when its consumer stops iterating.
    ///
    /// ```swift
    /// let changes = server.databaseChanges()          // listen first,
    /// for database in try server.databaseCatalogue() { … }   // then read what is there
    /// for await event in changes { … }
    /// ```
    ///
    /// The listener goes when the returned value is released, cancelled, or its iterating task
    /// cancelled.
    public func databaseChanges() -> DatabaseChanges {
        DatabaseChanges(listener: pushHub.subscribeToEveryDatabase())
    }

    /// Every registered user's databases that hold anything, each with its current change
    /// token, in the order of the users' IDs: what a consumer of ``databaseChanges()`` compares
    /// with the tokens it saved, to find what changed while it was away.
    ///
    /// Read from the storage's list of its logs' ends (``ServerStorage/databaseLogEnds()``:
    /// PostgreSQL in one query, LMDB environment by environment), creating no database; a
    /// storage without one has each registered user's databases opened, as a request would.
    public func databaseCatalogue() throws -> [ChangedDatabase] {
        let users = try self.users.allUsersAndNumbers()
        func token(_ number: UInt64, _ scope: DatabaseScope, _ last: LogOffset) -> DatabaseChangeToken {
            DatabaseChangeToken(
                offset: ChangeOffset(last), database: ServerDatabase.databaseID(userNumber: number, scope: scope))
        }
        if let ends = try storage.databaseLogEnds() {
            var byUser: [UInt64: [DatabaseScope: LogOffset]] = [:]
            for end in ends { byUser[end.user, default: [:]][end.scope] = end.lastOffset }
            return users.flatMap { user, number in
                DatabaseScope.allCases.compactMap { scope in
                    byUser[number]?[scope].map { last in
                        ChangedDatabase(user: user.rawValue, scope: scope, token: token(number, scope, last))
                    }
                }
            }
        }
        var catalogue: [ChangedDatabase] = []
        for (user, number) in users {
            for scope in DatabaseScope.allCases {
                let last = try store(user, scope).log.lastOffset
                guard last.rawValue > 0 else { continue }
                catalogue.append(ChangedDatabase(user: user.rawValue, scope: scope, token: token(number, scope, last)))
            }
        }
        return catalogue
    }
}

/// The events of ``SyncServer/databaseChanges()``, for one reader: each event is delivered once.
public final class DatabaseChanges: AsyncSequence, Sendable {
    public typealias Element = DatabaseChangeEvent
    let listener: DatabaseChangeListener

    init(listener: DatabaseChangeListener) { self.listener = listener }

    deinit { listener.finish() }

    /// Ends the sequence: an iteration waiting for the next event ends.
    public func cancel() { listener.finish() }

    /// Makes the next ``next()`` return an empty ``DatabaseChangeEvent/changed(_:)`` at once if it
    /// has nothing else: how a reader that waits for changes wakes to do something else (the HTTP
    /// stream's keep-alive).
    public func wake() { listener.wake() }

    /// The next event, waiting for one; `nil` once the sequence ended.
    public func next() async -> DatabaseChangeEvent? {
        await withTaskCancellationHandler {
            await listener.next()
        } onCancel: {
            listener.finish()
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(changes: self) }

    public struct Iterator: AsyncIteratorProtocol {
        let changes: DatabaseChanges

        public mutating func next() async -> DatabaseChangeEvent? { await changes.next() }
    }
}

/// One listener of ``PushHub/subscribeToEveryDatabase()``: the newest token of each database
/// that changed since the listener last took them, in the order they first changed.
final class DatabaseChangeListener: Sendable {
    private struct State {
        var order: [PushHub.Key] = []
        var tokens: [PushHub.Key: DatabaseChangeToken] = [:]
        var missed = false
        var woken = false
        var finished = false
        var waiter: CheckedContinuation<Void, Never>?
        var onFinish: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// Called once when the listener finishes (the hub forgets it).
    var onFinish: (@Sendable () -> Void)? {
        get { state.withLock { $0.onFinish } }
        set { state.withLock { $0.onFinish = newValue } }
    }

    /// `key` changed, its token now `token` (an older token than one held is ignored: notices
    /// from several nodes may arrive out of order).
    func changed(_ key: PushHub.Key, token: DatabaseChangeToken) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.finished else { return nil }
            if let held = state.tokens[key] {
                if held.offset.rawValue < token.offset.rawValue { state.tokens[key] = token }
            } else {
                state.order.append(key)
                state.tokens[key] = token
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Changes may have been lost.
    func missed() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.missed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Makes ``next()`` return `.changed([])` if it has nothing else.
    func wake() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.woken = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Ends the listener: ``next()`` returns `nil` once what it holds is taken.
    func finish() {
        let (waiter, onFinish) = state.withLock {
            state -> (CheckedContinuation<Void, Never>?, (@Sendable () -> Void)?) in
            guard !state.finished else { return (nil, nil) }
            state.finished = true
            defer {
                state.waiter = nil
                state.onFinish = nil
            }
            return (state.waiter, state.onFinish)
        }
        waiter?.resume()
        onFinish?()
    }

    /// The next event, waiting for one; `nil` once finished.
    func next() async -> DatabaseChangeEvent? {
        while true {
            let taken = state.withLock { state -> DatabaseChangeEvent?? in
                if state.missed {
                    state.missed = false
                    state.order = []
                    state.tokens = [:]
                    return .some(.missed)
                }
                if !state.order.isEmpty {
                    let changed = state.order.map { key in
                        ChangedDatabase(user: key.user.rawValue, scope: key.scope, token: state.tokens[key]!)
                    }
                    state.order = []
                    state.tokens = [:]
                    state.woken = false
                    return .some(.changed(changed))
                }
                if state.finished { return .some(nil) }
                if state.woken {
                    state.woken = false
                    return .some(.changed([]))
                }
                return nil
            }
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.missed || state.woken || !state.order.isEmpty || state.finished { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }
}
