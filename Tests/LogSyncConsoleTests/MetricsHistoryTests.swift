import CoreMetrics
import Foundation
import LogSyncConsole
import Synchronization
import Testing

/// The console's last hour of metrics: a bucket per minute and series, bounded.
@Suite("the console's metrics history")
struct MetricsHistoryTests {
    /// A clock the test moves.
    final class TestClock: Sendable {
        let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func now() -> Date { time.withLock { $0 } }
        func advance(minutes: Double) { time.withLock { $0 += minutes * 60 } }
    }

    @Test(
        "counters add up per minute, by their dimensions; timers keep count, mean and maximum; gauges their last value")
    func buckets() {
        let clock = TestClock()
        let history = MetricsHistory(now: clock.now)
        let ok = history.makeCounter(
            label: "logsync_http_requests_total", dimensions: [("route", "modifyRecords"), ("code", "ok")])
        let refused = history.makeCounter(
            label: "logsync_http_requests_total",
            dimensions: [("route", "modifyRecords"), ("code", "notAuthenticated")])
        let commit = history.makeTimer(label: "logsync_commit_duration_seconds", dimensions: [("store", "lmdb")])
        let channels = history.makeRecorder(label: "logsync_push_channels_open", dimensions: [], aggregate: false)

        ok.increment(by: 3)
        refused.increment(by: 1)
        commit.recordNanoseconds(2_000_000)
        commit.recordNanoseconds(4_000_000)
        channels.record(Int64(5))
        clock.advance(minutes: 1)
        ok.increment(by: 2)
        channels.record(Int64(7))

        let requests = history.perMinute("logsync_http_requests_total", .sum, minutes: 3)
        #expect(requests == [0, 4, 2])
        #expect(history.perMinute("logsync_http_requests_total", .sum, matching: ["code": "ok"], minutes: 2) == [3, 2])
        #expect(history.totals("logsync_http_requests_total", by: "code") == ["ok": 5, "notAuthenticated": 1])
        #expect(history.perMinute("logsync_commit_duration_seconds", .count, minutes: 2) == [2, 0])
        #expect(history.perMinute("logsync_commit_duration_seconds", .mean, minutes: 2)[0] == 0.003)
        #expect(history.perMinute("logsync_commit_duration_seconds", .max, minutes: 2)[0] == 0.004)
        #expect(history.perMinute("logsync_push_channels_open", .last, minutes: 2) == [5, 7])
        #expect(history.perMinute("logsync_http_requests_total", .sum).count == MetricsHistory.minutes)
    }

    @Test("a minute more than an hour old is gone, and its bucket serves the new minute afresh")
    func anHourOnly() {
        let clock = TestClock()
        let history = MetricsHistory(now: clock.now)
        let counter = history.makeCounter(label: "logsync_records_saved_total", dimensions: [])
        counter.increment(by: 10)
        clock.advance(minutes: 59)
        #expect(history.perMinute("logsync_records_saved_total", .sum).first == 10)
        #expect(history.totals("logsync_records_saved_total", by: "none").isEmpty)
        clock.advance(minutes: 1)
        #expect(history.perMinute("logsync_records_saved_total", .sum).allSatisfy { $0 == 0 })
        counter.increment(by: 4)  // the same bucket as the first minute's, 60 minutes later
        #expect(history.perMinute("logsync_records_saved_total", .sum).last == 4)
        #expect(history.perMinute("logsync_records_saved_total", .sum).reduce(0, +) == 4)
    }

    @Test("past its cap, new series are dropped and record nothing; the series kept go on")
    func bounded() {
        let history = MetricsHistory(maxSeries: 3)
        let handlers = (0..<5).map { index in
            history.makeCounter(label: "logsync_x_total", dimensions: [("n", "\(index)")])
        }
        for handler in handlers { handler.increment(by: 1) }
        #expect(history.seriesCount == 3)
        #expect(history.perMinute("logsync_x_total", .sum).last == 3)
        // The same series asked again is the one kept.
        history.makeCounter(label: "logsync_x_total", dimensions: [("n", "0")]).increment(by: 1)
        #expect(history.perMinute("logsync_x_total", .sum).last == 4)
    }
}
