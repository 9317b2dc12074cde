import Foundation
import KeyValueLog
import LogStore
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

#if canImport(Glibc)
    import Glibc
#endif

/// The status line long passes write to a terminal: what it writes, how often (by count), that
/// it erases itself, and that it writes nothing when it is not enabled.
@Suite("Progress indicator")
struct ProgressIndicatorTests {
    static let erase = "\u{1B}[K"

    @Test func writesALineEveryNEntriesAndErasesItAtTheEnd() {
        var progress = ProgressIndicator(label: "dump", total: 25_000, every: 10_000, isEnabled: true, output: "")
        for done in 1...25_000 as ClosedRange<UInt64> { progress.update(done: done) }
        progress.finish()
        #expect(
            progress.output == "\rdump: 10000 of 25000 entries (40%)\(Self.erase)"
                + "\rdump: 20000 of 25000 entries (80%)\(Self.erase)"
                + "\r\(Self.erase)")
        // Finishing twice erases once.
        progress.finish()
        #expect(progress.output.hasSuffix("(80%)\(Self.erase)\r\(Self.erase)"))
    }

    @Test func aShortPassWritesNothing() {
        var progress = ProgressIndicator(label: "stats", total: 9_999, every: 10_000, isEnabled: true, output: "")
        for done in 1...9_999 as ClosedRange<UInt64> { progress.update(done: done) }
        progress.finish()
        #expect(progress.output.isEmpty)
    }

    @Test func countsThatJumpAreShownOncePerStep() {
        var progress = ProgressIndicator(label: "diff", total: nil, every: 100, isEnabled: true, output: "")
        for done in [50, 100, 150, 199, 350, 351] as [UInt64] { progress.update(done: done) }
        #expect(progress.output == "\rdiff: 100 entries\(Self.erase)\rdiff: 350 entries\(Self.erase)")
    }

    @Test func eventsCarryTheTotalAndSteps() {
        var progress = ProgressIndicator(label: "replay", total: nil, every: 2, isEnabled: true, output: "")
        progress.report(.entries(done: 1, total: 4))
        progress.report(.entries(done: 2, total: 4))
        progress.report(.step("verifying projections"))
        progress.finish()
        #expect(progress.total == 4)
        #expect(
            progress.output == "\rreplay: 2 of 4 entries (50%)\(Self.erase)"
                + "\rreplay: verifying projections…\(Self.erase)\r\(Self.erase)")
    }

    @Test func disabledItWritesNothing() {
        var progress = ProgressIndicator(label: "dump", total: 100, every: 1, isEnabled: false, output: "")
        for done in 1...100 as ClosedRange<UInt64> { progress.update(done: done) }
        progress.report(.step("verifying projections"))
        progress.finish()
        #expect(progress.output.isEmpty)
    }

    @Test(arguments: [
        (0 as UInt64, 3 as UInt64, "x: 0 of 3 entries (0%)"), (1, 3, "x: 1 of 3 entries (33%)"),
        (3, 3, "x: 3 of 3 entries (100%)"),
        (5, 0, "x: 5 entries"), (UInt64.max, UInt64.max, "x: \(UInt64.max) of \(UInt64.max) entries (100%)"),
    ])
    func text(done: UInt64, total: UInt64, expected: String) {
        #expect(ProgressIndicator(label: "x", total: total, isEnabled: true, output: "").text(done: done) == expected)
    }

    /// The decision `standardError(label:total:)` takes: a file or a pipe is not a terminal, a
    /// pseudo-terminal is.
    @Test func onlyATerminalIsATerminal() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("file").path
            let file = open(path, O_CREAT | O_WRONLY, 0o600)
            try #require(file >= 0)
            defer { close(file) }
            #expect(!isTerminal(file))
            var pipeEnds: [Int32] = [0, 0]
            try #require(pipe(&pipeEnds) == 0)
            defer {
                close(pipeEnds[0])
                close(pipeEnds[1])
            }
            #expect(!isTerminal(pipeEnds[1]))
            let terminal = open("/dev/ptmx", O_RDWR | O_NOCTTY)  // a pseudo-terminal's master side
            if terminal >= 0 {
                defer { close(terminal) }
                #expect(isTerminal(terminal))
            }
        }
    }

    /// The passes report every entry they read, so the indicator can count them.
    @Test func dumpAndStatsReportEachEntry() throws {
        try withTemporaryDirectory { directory in
            try writeFixtureLog(at: directory, count: 30)
            let log = try Log.open(at: directory, options: .init(durability: .fast))
            var events: [ProgressEvent] = []
            var text = ""
            try EntryDumper().dump(log, from: LogOffset(11), through: LogOffset(20), to: &text) { events.append($0) }
            #expect(events == (1...10).map { .entries(done: $0, total: 10) })

            events = []
            _ = try LogStats.collect(log, decoder: nil) { events.append($0) }
            #expect(events == (1...30).map { .entries(done: $0, total: 30) })

            var progress = ProgressIndicator(label: "dump", total: nil, every: 8, isEnabled: true, output: "")
            try EntryDumper().dump(log, to: &text) { progress.report($0) }
            progress.finish()
            #expect(
                progress.output
                    == "\rdump: 8 of 30 entries (26%)\(Self.erase)\rdump: 16 of 30 entries (53%)\(Self.erase)"
                    + "\rdump: 24 of 30 entries (80%)\(Self.erase)\r\(Self.erase)")
        }
    }
}
