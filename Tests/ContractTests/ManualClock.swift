import Foundation
import Synchronization

/// The server's wall clock in a contract test: it moves only when the test moves it.
///
/// Dates stay on whole seconds (unless a test asks otherwise), so they survive any wire
/// encoding exactly and can be compared with `==`.
///
/// ```swift
/// let clock = ManualClock()
/// let t0 = clock.now
/// clock.advance(by: 60)
/// ```
final class ManualClock: Sendable {
    /// Where every test's clock starts: 2025-06-15 15:06:40 UTC.
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    private let current: Mutex<Date>

    init(_ start: Date = ManualClock.start) {
        current = Mutex(start)
    }

    /// The current time.
    var now: Date { current.withLock { $0 } }

    /// Moves the clock by `seconds` (backwards when negative).
    func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`.
    func set(_ date: Date) {
        current.withLock { $0 = date }
    }

    /// The clock as the `now` closure a server takes.
    var closure: @Sendable () -> Date {
        { [self] in now }
    }
}
