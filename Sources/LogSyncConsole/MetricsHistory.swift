import CoreMetrics
import Foundation
import Synchronization

/// The last hour of the server's metrics, a bucket per minute, for the console's charts and its
/// recent errors: a swift-metrics backend that `logsync-server serve` multiplexes beside the
/// Prometheus one.
///
/// Each series (a label and its dimensions) keeps 60 one-minute buckets: counters their sum,
/// timers their count, sum and maximum, recorders (gauges) their last value. Memory is bounded:
/// past ``maxSeries`` series, new ones are dropped (their handlers record nothing).
///
/// ```swift
/// let history = MetricsHistory()
/// MetricsSystem.bootstrap(MultiplexMetricsHandler(factories: [prometheus, history]))
/// history.perMinute("logsync_http_requests_total", .sum)   // the last 60 minutes, oldest first
/// ```
public final class MetricsHistory: MetricsFactory, Sendable {
    /// What a series is.
    public enum Kind: String, Sendable, Hashable {
        case counter, recorder, timer
    }

    /// What a chart reads of a minute's bucket.
    public enum Measure: Sendable, Hashable {
        /// Counters: what was added; timers: the seconds recorded in all.
        case sum
        /// How many values were recorded (a timer's events).
        case count
        /// The largest value recorded (a timer's slowest, in seconds).
        case max
        /// The mean value recorded (a timer's mean, in seconds).
        case mean
        /// The last value recorded (a gauge).
        case last
    }

    /// A series' identity: its label and its dimensions, sorted by name.
    public struct Key: Sendable, Hashable {
        public var label: String
        public var dimensions: [String: String]
    }

    /// How many minutes are kept.
    public static let minutes = 60

    /// The most series kept; further series are dropped.
    public let maxSeries: Int
    private let now: @Sendable () -> Date
    private let series = Mutex<[Key: Series]>([:])

    /// - Parameters:
    ///   - maxSeries: The most series kept (2,000 by default).
    ///   - now: The clock whose minute a value falls in; tests give one they move.
    public init(maxSeries: Int = 2_000, now: @escaping @Sendable () -> Date = { Date() }) {
        self.maxSeries = maxSeries
        self.now = now
    }

    // MARK: Reading

    /// The series kept with this label.
    public func keys(label: String) -> [Key] {
        series.withLock { $0.keys.filter { $0.label == label } }
            .sorted { $0.dimensions.sorted(by: <).description < $1.dimensions.sorted(by: <).description }
    }

    /// How many series are kept.
    public var seriesCount: Int { series.withLock { $0.count } }

    /// The last `minutes` minutes (the current one last) of the series with `label` whose
    /// dimensions include `matching`, added together minute by minute (`max` and `last` take
    /// the largest); 0 for a minute with nothing.
    public func perMinute(
        _ label: String, _ measure: Measure, matching: [String: String] = [:], minutes: Int = MetricsHistory.minutes
    ) -> [Double] {
        let minute = Self.minute(of: now())
        let count = min(max(minutes, 1), Self.minutes)
        var values = [Double](repeating: 0, count: count)
        var counts = [Double](repeating: 0, count: count)
        for found in matchingSeries(label, matching) {
            let buckets = found.snapshot()
            for index in 0..<count {
                let wanted = minute - Int64(count - 1 - index)
                guard let bucket = buckets[Int(((wanted % 60) + 60) % 60)], bucket.minute == wanted else { continue }
                switch measure {
                case .sum, .mean: values[index] += bucket.sum
                case .count: values[index] += Double(bucket.count)
                case .max: values[index] = Swift.max(values[index], bucket.max)
                case .last: values[index] = Swift.max(values[index], bucket.last)
                }
                counts[index] += Double(bucket.count)
            }
        }
        if measure == .mean {
            for index in values.indices where counts[index] > 0 { values[index] /= counts[index] }
        }
        return values
    }

    /// The sum over the last `minutes` minutes of the series with `label`, grouped by the value
    /// of their dimension `dimension` (series without it are left out): how the console counts
    /// recent errors by code.
    public func totals(
        _ label: String, by dimension: String, minutes: Int = MetricsHistory.minutes
    ) -> [String: Double] {
        var totals: [String: Double] = [:]
        let values = series.withLock { $0.filter { $0.key.label == label } }
        for (key, found) in values {
            guard let group = key.dimensions[dimension] else { continue }
            let sum = found.sum(since: Self.minute(of: now()) - Int64(min(minutes, Self.minutes)) + 1)
            totals[group, default: 0] += sum
        }
        return totals
    }

    private func matchingSeries(_ label: String, _ matching: [String: String]) -> [Series] {
        series.withLock { all in
            all.compactMap { key, value in
                key.label == label && matching.allSatisfy({ key.dimensions[$0.key] == $0.value }) ? value : nil
            }
        }
    }

    static func minute(of date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / 60).rounded(.down))
    }

    // MARK: MetricsFactory

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let series = series(label, dimensions, .counter) else { return NOOPMetricsHandler.instance }
        return Handler(series: series, now: now)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard let series = series(label, dimensions, .recorder) else { return NOOPMetricsHandler.instance }
        return Handler(series: series, now: now)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard let series = series(label, dimensions, .timer) else { return NOOPMetricsHandler.instance }
        return Handler(series: series, now: now)
    }

    public func destroyCounter(_ handler: any CounterHandler) {}
    public func destroyRecorder(_ handler: any RecorderHandler) {}
    public func destroyTimer(_ handler: any TimerHandler) {}

    /// The series of `label` and `dimensions`, made on first use; `nil` past ``maxSeries``.
    private func series(_ label: String, _ dimensions: [(String, String)], _ kind: Kind) -> Series? {
        var named: [String: String] = [:]
        for (name, value) in dimensions { named[name] = value }
        let key = Key(label: label, dimensions: named)
        return series.withLock { all in
            if let found = all[key] { return found }
            guard all.count < maxSeries else { return nil }
            let made = Series(kind: kind)
            all[key] = made
            return made
        }
    }

    /// One minute of a series.
    struct Bucket: Sendable {
        var minute: Int64
        var count: Int64 = 0
        var sum: Double = 0
        var max: Double = 0
        var last: Double = 0
    }

    /// One series' 60 buckets, a minute's at `minute % 60`.
    final class Series: Sendable {
        let kind: Kind
        private let buckets = Mutex<[Bucket?]>(Array(repeating: nil, count: MetricsHistory.minutes))

        init(kind: Kind) { self.kind = kind }

        func record(_ value: Double, at minute: Int64, adding: Bool) {
            buckets.withLock { buckets in
                let index = Int(((minute % 60) + 60) % 60)
                var bucket = buckets[index].flatMap { $0.minute == minute ? $0 : nil } ?? Bucket(minute: minute)
                bucket.count += 1
                bucket.sum += value
                bucket.max = bucket.count == 1 ? value : Swift.max(bucket.max, value)
                bucket.last = value
                buckets[index] = bucket
            }
        }

        func reset(at minute: Int64) {
            buckets.withLock { buckets in buckets[Int(((minute % 60) + 60) % 60)] = Bucket(minute: minute) }
        }

        func snapshot() -> [Bucket?] { buckets.withLock { $0 } }

        func sum(since minute: Int64) -> Double {
            buckets.withLock { $0.reduce(0) { $0 + (($1?.minute ?? .min) >= minute ? $1!.sum : 0) } }
        }
    }

    /// The handler of every kind: it records into its series at the clock's minute.
    final class Handler: CounterHandler, RecorderHandler, TimerHandler, Sendable {
        let series: Series
        let now: @Sendable () -> Date

        init(series: Series, now: @escaping @Sendable () -> Date) {
            self.series = series
            self.now = now
        }

        private var minute: Int64 { MetricsHistory.minute(of: now()) }

        func increment(by amount: Int64) { series.record(Double(amount), at: minute, adding: true) }
        func reset() { series.reset(at: minute) }
        func record(_ value: Int64) { series.record(Double(value), at: minute, adding: false) }
        func record(_ value: Double) { series.record(value, at: minute, adding: false) }
        func recordNanoseconds(_ duration: Int64) {
            series.record(Double(duration) / 1_000_000_000, at: minute, adding: false)
        }
    }
}
