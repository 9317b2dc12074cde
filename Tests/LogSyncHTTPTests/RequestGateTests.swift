import LogSyncHTTPServer
import SyncModel
import Testing

/// The server's memory budget for the requests it decodes and handles at once: requests wait
/// their turn, first come first served, and only a full queue is refused.
@Suite("HTTP: the memory budget of requests in progress")
struct RequestGateTests {
    static let mib = 1 << 20

    /// Waits until `condition` holds, yielding in between; fails after 30 seconds.
    func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test("requests within the budget go at once; one past it waits for the others, and those behind it wait too")
    func waitsInOrder() async throws {
        let gate = RequestGate(capacity: 10 * Self.mib, maxWaiting: 10)
        let first = try await gate.enter(weight: 6 * Self.mib)
        let second = try await gate.enter(weight: 3 * Self.mib)
        #expect(gate.load.inUse == 9 * Self.mib)

        // 4 MiB do not fit: it waits; 64 KiB would fit, but comes after it and waits as well.
        let large = Task { try await gate.enter(weight: 4 * Self.mib) }
        try await waitUntil("the large request waits") { gate.load.waiting == 1 }
        let small = Task { try await gate.enter(weight: RequestGate.minimumWeight) }
        try await waitUntil("the small request waits") { gate.load.waiting == 2 }

        gate.leave(second)  // 6 MiB in use: the large one fits, and the budget is full again.
        let largeTicket = try await large.value
        #expect(gate.load == (inUse: 10 * Self.mib, waiting: 1))
        gate.leave(first)  // 4 MiB in use: the small one fits.
        let smallTicket = try await small.value
        #expect(gate.load == (inUse: 4 * Self.mib + RequestGate.minimumWeight, waiting: 0))
        for ticket in [largeTicket, smallTicket] { gate.leave(ticket) }
        #expect(gate.load == (inUse: 0, waiting: 0))
    }

    @Test("a request estimated above the whole budget runs alone")
    func oversized() async throws {
        let gate = RequestGate(capacity: 10 * Self.mib, maxWaiting: 10)
        let huge = try await gate.enter(weight: 100 * Self.mib)
        #expect(gate.load.inUse == 10 * Self.mib)
        let next = Task { try await gate.enter(weight: 1) }
        try await waitUntil("the next request waits") { gate.load.waiting == 1 }
        gate.leave(huge)
        gate.leave(try await next.value)
        #expect(gate.load == (inUse: 0, waiting: 0))
    }

    @Test("past the queue bound: serviceUnavailable with a retry-after; a cancelled waiter leaves the queue")
    func queueBound() async throws {
        let gate = RequestGate(capacity: Self.mib, maxWaiting: 1)
        let holder = try await gate.enter(weight: Self.mib)
        let waiting = Task { try await gate.enter(weight: Self.mib) }
        try await waitUntil("one request waits") { gate.load.waiting == 1 }

        let error = await #expect(throws: SyncError.self) { _ = try await gate.enter(weight: 1) }
        #expect(error?.code == .serviceUnavailable)
        #expect(error?.retryAfter == .seconds(1))
        #expect(error?.message.contains("1 more wait") == true, "\(String(describing: error))")

        waiting.cancel()
        let cancelled = await #expect(throws: SyncError.self) { _ = try await waiting.value }
        #expect(cancelled?.code == .serviceUnavailable)
        #expect(gate.load == (inUse: Self.mib, waiting: 0))
        gate.leave(holder)
        #expect(gate.load == (inUse: 0, waiting: 0))
    }

    @Test("a request's estimate: three times its bytes and 320 bytes per element, at least 64 KiB")
    func weights() {
        #expect(RequestGate.weight(bodyBytes: 10, elements: 1) == RequestGate.minimumWeight)
        #expect(RequestGate.weight(bodyBytes: 1_000_000, elements: 100_000) == 3_000_000 + 32_000_000)
    }
}
