/// How long a dropped push channel waits before each attempt to reconnect: exponential backoff
/// with jitter, capped. A pure value, so the schedule is tested without a clock.
///
/// ```swift
/// let policy = ReconnectPolicy(initialDelay: .milliseconds(250), maxDelay: .seconds(30))
/// policy.delay(afterFailures: 0, random: 0.5)   // 250 ms: the first attempt after a drop
/// policy.delay(afterFailures: 3, random: 0.5)   // 2 s
/// ```
public struct ReconnectPolicy: Sendable, Hashable {
    /// The wait before the first attempt after a connection drops.
    public var initialDelay: Duration
    /// The longest wait.
    public var maxDelay: Duration
    /// How much each failed attempt multiplies the wait.
    public var multiplier: Double
    /// The fraction by which a wait is randomly shortened or lengthened (0.2: ±20 %), so that
    /// many devices dropped at once do not reconnect at once.
    public var jitter: Double

    public init(
        initialDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(30), multiplier: Double = 2,
        jitter: Double = 0.2
    ) {
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The wait before the next attempt, after `failures` failed attempts since the channel was
    /// last connected.
    ///
    /// - Parameters:
    ///   - failures: Failed attempts since the last successful connection (0 for the first
    ///     attempt after a drop).
    ///   - random: A number in `0...1`; 0.5 gives the wait without jitter.
    public func delay(afterFailures failures: Int, random: Double) -> Duration {
        let base = seconds(initialDelay) * pow(multiplier, Double(max(0, min(failures, 64))))
        let capped = min(base, seconds(maxDelay))
        let jittered = capped * (1 + jitter * (2 * min(max(random, 0), 1) - 1))
        return .microseconds(Int64(max(0, jittered) * 1_000_000))
    }

    private func seconds(_ duration: Duration) -> Double {
        let (whole, attoseconds) = duration.components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    private func pow(_ base: Double, _ exponent: Double) -> Double {
        var result = 1.0
        for _ in 0..<Int(exponent) {
            result *= base
            if result > 1e12 { break }
        }
        return result
    }
}
