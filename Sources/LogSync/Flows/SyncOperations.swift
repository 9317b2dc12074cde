import SyncModel

/// Runs an engine's syncs one at a time, in the order they were asked for (F10, F77).
///
/// Every send, fetch and app-triggered `stateUpdate` delivery is an operation. An operation
/// starts once the one before it has finished, so event delivery is serial across all of them.
/// A call that asks for an operation of the same kind and options as one that is still queued
/// joins it instead of queueing another; a fetch also joins a fetch already running (F48, F77),
/// while a send queues behind a running one, so that changes added meanwhile are sent too.
actor SyncOperations {
    enum Kind: Equatable, Sendable {
        case send(SyncEngine.SendChangesOptions)
        case fetch(SyncEngine.FetchChangesOptions)
        case stateUpdate
        case accountCheck
        case redelivery
    }

    private struct Operation {
        let id: UInt64
        let kind: Kind
        var started: Bool
        let task: Task<Void, any Error>
    }

    private var operations: [Operation] = []
    private var nextID: UInt64 = 0

    /// Runs `body` as an operation of `kind`, or joins an equal one, and returns when it ends.
    ///
    /// - Throws: what `body` throws; `SyncError` `operationCancelled` if the operation was
    ///   cancelled before it started.
    func run(_ kind: Kind, body: @escaping @Sendable () async throws -> Void) async throws {
        try await enqueue(kind, body: body).value
    }

    /// Queues an operation (or finds the one to join) and returns its task.
    func enqueue(_ kind: Kind, body: @escaping @Sendable () async throws -> Void) -> Task<Void, any Error> {
        let joinsRunning: Bool
        switch kind {
        case .fetch: joinsRunning = true
        case .send, .stateUpdate, .accountCheck, .redelivery: joinsRunning = false
        }
        if let existing = operations.first(where: { $0.kind == kind && (!$0.started || joinsRunning) }) {
            return existing.task
        }
        let previous = operations.last?.task
        let id = nextID
        nextID += 1
        let task = Task {
            _ = await previous?.result
            guard !Task.isCancelled else {
                self.finish(id)
                throw SyncError(.operationCancelled, "the engine's operations were cancelled before this one started")
            }
            self.start(id)
            do {
                try await body()
                self.finish(id)
            } catch {
                self.finish(id)
                throw error
            }
        }
        operations.append(Operation(id: id, kind: kind, started: false, task: task))
        return task
    }

    /// Cancels every operation queued or running (F79). A running one stops at its next step,
    /// after applying and reporting what the server already answered.
    func cancelAll() {
        for operation in operations { operation.task.cancel() }
    }

    /// Waits until every operation queued now has ended.
    func drain() async {
        for operation in operations { _ = await operation.task.result }
    }

    /// The kinds of the operations queued and not started yet, in order (for tests).
    var queuedKinds: [Kind] { operations.filter { !$0.started }.map(\.kind) }

    private func start(_ id: UInt64) {
        if let index = operations.firstIndex(where: { $0.id == id }) { operations[index].started = true }
    }

    private func finish(_ id: UInt64) {
        operations.removeAll { $0.id == id }
    }
}
