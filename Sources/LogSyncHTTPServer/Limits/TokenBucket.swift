/// A token bucket: a client may send `burst` requests at once, then `rate` per second. Pure:
/// time is the `now` each call is given (a monotonic reading, as a duration since any fixed
/// origin), so it is tested without a clock.
///
/// ```swift
/// var bucket = TokenBucket(rate: 2, burst: 4, now: .zero)
/// bucket.take(at: .zero)               // nil: taken (3 left)
/// // … three more at .zero, then:
/// bucket.take(at: .zero)               // .milliseconds(500): the wait until the next token
/// ```
package struct TokenBucket: Sendable, Equatable {
    /// Tokens added per second.
    package let rate: Double
    /// The most tokens the bucket holds.
    package let burst: Double
    package private(set) var tokens: Double
    package private(set) var updated: Duration

    /// A full bucket at `now`.
    package init(rate: Double, burst: Int, now: Duration) {
        self.rate = max(0, rate)
        self.burst = Double(max(1, burst))
        tokens = self.burst
        updated = now
    }

    /// Takes a token at `now`: `nil` if there was one, otherwise how long until there is (the
    /// bucket is left as it was).
    package mutating func take(at now: Duration) -> Duration? {
        refill(at: now)
        guard tokens < 1 else {
            tokens -= 1
            return nil
        }
        return wait(at: now)
    }

    /// How long until a token is there at `now`, without taking one: `nil` if there is one now.
    package func wait(at now: Duration) -> Duration? {
        var copy = self
        copy.refill(at: now)
        guard copy.tokens < 1 else { return nil }
        guard rate > 0 else { return .seconds(Int64.max / 4) }
        return .nanoseconds(Int64(((1 - copy.tokens) / rate * 1e9).rounded(.up)))
    }

    /// Whether the bucket is full at `now`: as good as no bucket at all.
    package func isFull(at now: Duration) -> Bool {
        var copy = self
        copy.refill(at: now)
        return copy.tokens >= burst
    }

    private mutating func refill(at now: Duration) {
        // A clock read out of order (a later reading first) adds nothing and loses nothing.
        guard now > updated else { return }
        let elapsed = now - updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        tokens = min(burst, tokens + seconds * rate)
        updated = now
    }
}
