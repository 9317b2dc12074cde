import LogSyncWire
import SyncModel
import Synchronization

/// The requests a server decodes and handles at once, held to a budget of memory
/// (``HTTPSyncServer/Configuration/requestMemoryBudget``). Each request is estimated, from its
/// body's measure (``LogSyncWire/BodyShape``) before anything is decoded, at what decoding and
/// handling it takes (``weight(bodyBytes:elements:)``); one that would take the total past the
/// budget waits until enough of the others have finished, first come first served. At most
/// ``HTTPSyncServer/Configuration/maxRequestsWaiting`` wait; a request beyond them is refused with
/// `serviceUnavailable` and a retry-after (503).
///
/// So the memory of the requests being handled together is bounded, however many arrive at once.
package final class RequestGate: Sendable {
    /// What a request counts while it holds its place.
    package struct Ticket: Sendable {
        package let weight: Int
    }

    /// The least a request counts, however small its body: its answer and its work take memory too.
    package static let minimumWeight = 64 * 1024
    /// What a request is estimated to take per byte of its body: the body, the strings and
    /// bytes decoded from it, and the record or log entry they go into.
    static let weightPerByte = 3
    /// What a request is estimated to take per element of its body: a decoded message and the
    /// model value made of it. Measured: about 310 bytes per element for a record of 100,000
    /// list elements, 170 for 400 records of 60 fields, decoded, saved and answered
    /// (Docs/Performance.md, "Memory per request").
    static let weightPerElement = 320

    /// The estimate of what a request whose body has `bodyBytes` and `elements` takes.
    package static func weight(bodyBytes: Int, elements: Int) -> Int {
        max(minimumWeight, bodyBytes * weightPerByte + elements * weightPerElement)
    }

    package let capacity: Int
    package let maxWaiting: Int
    private let state = Mutex(State())

    private struct State {
        var inUse = 0
        var waiting: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private struct Waiter {
        let id: UInt64
        let weight: Int
        let continuation: CheckedContinuation<Void, any Error>
    }

    package init(capacity: Int, maxWaiting: Int) {
        self.capacity = max(1, capacity)
        self.maxWaiting = max(0, maxWaiting)
    }

    /// The estimated bytes of the requests being decoded and handled now, and how many wait.
    package var load: (inUse: Int, waiting: Int) {
        state.withLock { ($0.inUse, $0.waiting.count) }
    }

    /// Waits for the place of a request estimated at `weight` bytes (``weight(bodyBytes:elements:)``;
    /// one over the whole budget counts as the budget, and so runs alone), and takes it.
    ///
    /// - Throws: ``SyncError`` `serviceUnavailable` (503) with a retry-after when ``maxWaiting``
    ///   requests wait already, or the task was cancelled while it waited.
    package func enter(weight: Int) async throws(SyncError) -> Ticket {
        let weight = min(capacity, max(1, weight))
        let admitted: UInt64? = state.withLock { state in
            if state.waiting.isEmpty, state.inUse + weight <= capacity {
                state.inUse += weight
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id = admitted else { return Ticket(weight: weight) }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let refusal: (any Error)? = state.withLock { state in
                        guard state.waiting.count < maxWaiting else { return Self.full(maxWaiting) }
                        guard !Task.isCancelled else { return CancellationError() }
                        state.waiting.append(Waiter(id: id, weight: weight, continuation: continuation))
                        return nil
                    }
                    if let refusal { continuation.resume(throwing: refusal) }
                }
            } onCancel: {
                let removed = state.withLock { state -> Waiter? in
                    guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiting.remove(at: index)
                }
                removed?.continuation.resume(throwing: CancellationError())
            }
        } catch let refusal as SyncError {
            throw refusal
        } catch {
            throw SyncError(
                .serviceUnavailable, "the request was cancelled while it waited to be handled", retryAfter: .seconds(1))
        }
        return Ticket(weight: weight)
    }

    /// Gives back a request's place, letting in those waiting that now fit, in order.
    package func leave(_ ticket: Ticket) {
        let admitted = state.withLock { state -> [Waiter] in
            state.inUse -= ticket.weight
            var admitted: [Waiter] = []
            while let next = state.waiting.first, state.inUse + next.weight <= capacity {
                state.inUse += next.weight
                admitted.append(state.waiting.removeFirst())
            }
            return admitted
        }
        for waiter in admitted { waiter.continuation.resume() }
    }

    private static func full(_ maxWaiting: Int) -> SyncError {
        SyncError(
            .serviceUnavailable,
            "the server is handling as many requests as its memory budget allows and \(maxWaiting) more wait; retry later",
            retryAfter: .seconds(1))
    }
}
