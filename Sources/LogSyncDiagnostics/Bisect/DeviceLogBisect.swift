import Foundation
import LogStore
import LogSync

/// What a bisection of a device log found: the first offset after which an invariant no longer
/// holds, and how many states it reconstructed to find it.
public struct DeviceBisectResult: Sendable, Hashable, CustomStringConvertible {
    /// One state checked: its offset and whether the invariant held there.
    public struct Check: Sendable, Hashable {
        public var offset: LogOffset
        public var holds: Bool
    }

    /// The invariant's name (`projections`, or the name given to a closure).
    public var invariant: String
    /// The last offset of the range bisected.
    public var through: LogOffset
    /// The first offset after whose entry the invariant fails, or `nil` when it holds at
    /// `through` (the bisection then checks nothing else).
    public var firstBadOffset: LogOffset?
    /// Why it fails there (the invariant's line), or `nil`.
    public var violation: String?
    /// How many engine states were reconstructed: one per check.
    public var reconstructions: Int
    /// Every state checked, in the order checked.
    public var checks: [Check]

    /// `invariant "projections" holds through offset 42 (1 reconstruction)` or `invariant
    /// "projections" first fails after offset 61234 (18 reconstructions): …`.
    public var description: String {
        let count = "\(reconstructions) reconstruction\(reconstructions == 1 ? "" : "s")"
        guard let bad = firstBadOffset else {
            return "invariant \"\(invariant)\" holds through offset \(through) (\(count))"
        }
        return "invariant \"\(invariant)\" first fails after offset \(bad) (\(count))"
            + (violation.map { ": \($0)" } ?? "")
    }

    /// The object `logtool bisect --json` writes, keys in this order: `invariant`, `through`,
    /// `holds`, `firstBadOffset` (`null` when it holds), `lastGoodOffset` (`null` when it
    /// holds), `violation` (`null` when it holds), `reconstructions`, `checks` (`offset`,
    /// `holds`, in the order checked).
    public var json: String {
        JSONText.object([
            ("invariant", JSONText.string(invariant)),
            ("through", JSONText.number(through.rawValue)),
            ("holds", JSONText.bool(firstBadOffset == nil)),
            ("firstBadOffset", JSONText.optional(firstBadOffset.map { JSONText.number($0.rawValue) })),
            ("lastGoodOffset", JSONText.optional(firstBadOffset.map { JSONText.number($0.rawValue - 1) })),
            ("violation", JSONText.optional(violation.map(JSONText.string))),
            ("reconstructions", JSONText.number(reconstructions)),
            (
                "checks",
                JSONText.array(
                    checks.map {
                        JSONText.object([
                            ("offset", JSONText.number($0.offset.rawValue)), ("holds", JSONText.bool($0.holds)),
                        ])
                    })
            ),
        ])
    }
}

/// Finds the first offset of a device log after which an invariant stops holding, by bisection:
/// O(log n) engine states reconstructed for a log of n entries.
///
/// The invariant is assumed to hold on the empty log and, once broken, to stay broken (as a
/// broken projection or a lost change does); where it breaks and heals again, the bisection
/// still ends at an offset where it held before and fails after, though not always the first.
///
/// **How a state is reconstructed.** The entries are replayed into a scratch device log (in the
/// system's temporary directory, removed at the end) whose index rebuilds as they are appended,
/// as `DeviceLog.state(at:)` does. The bisection keeps the scratch log of the last offset known
/// good: to try a later offset it copies that log's file and appends only the entries between,
/// so the whole search appends about 2n entries, not n log n. The fold in memory
/// (``DeviceStateReplay``) is a value kept the same way.
///
/// - Complexity: ⌈log₂ n⌉ + 1 reconstructions at most; O(n) entries read, folded and appended.
public struct DeviceLogBisect {
    /// The log bisected (only read).
    public let log: Log
    /// The projection the scratch logs rebuild as their index: the device index, unless a test
    /// gives another (a deliberately broken copy, with the index's name and tables).
    let index: (any Projection)?

    /// A bisection of `deviceLog`.
    public init(_ deviceLog: DeviceLog) {
        self.log = deviceLog.log
        self.index = nil
    }

    /// A bisection of any log holding device entries, such as one a tool opened read-only
    /// without its index.
    public init(log: Log) {
        self.log = log
        self.index = nil
    }

    /// A bisection whose scratch logs keep `index` as their device index, for tests that break
    /// the projection on purpose.
    package init(log: Log, index: any Projection) {
        self.log = log
        self.index = index
    }

    /// Bisects the entries `1...through` (`nil`: the whole log) for `invariant`.
    ///
    /// - Parameters:
    ///   - invariant: What must hold after every entry.
    ///   - through: The last offset to consider; `nil` for the log's last.
    ///   - progress: Told of each state as it is reconstructed (`.step`) and of entries folded.
    /// - Throws: ``DiagnosticsError`` `offsetPastEnd` for `through` past the end, `corruptEntry`
    ///   naming the offset of an entry that cannot be read or decoded, `replayFailed` or
    ///   `scratchDirectory` when the scratch log fails.
    public func run(
        _ invariant: DeviceInvariant, through: LogOffset? = nil, progress: (ProgressEvent) -> Void = { _ in }
    ) throws(DiagnosticsError) -> DeviceBisectResult {
        let end: LogOffset
        do {
            (end, _) = try log.range(through: through) { asked, last in
                "offset \(asked) is past the end of the log \"\(log.name)\" in \(log.environment.path), which ends at offset \(last)"
            }
        } catch let error as DiagnosticsError {
            throw error
        } catch {
            throw Self.failure(error, at: nil, of: log)
        }
        var result = DeviceBisectResult(
            invariant: invariant.name, through: end, firstBadOffset: nil, violation: nil, reconstructions: 0, checks: []
        )
        guard end > .zero else { return result }

        let scratch: ScratchDirectory
        do { scratch = try ScratchDirectory(prefix: "logsync-bisect") } catch let error as DiagnosticsError {
            throw error
        } catch {
            throw DiagnosticsError(.scratchDirectory, "\(error)")
        }
        defer { scratch.remove() }
        var searcher = Searcher(source: log, scratch: scratch, index: index)
        func check(_ offset: LogOffset) throws(DiagnosticsError) -> String? {
            progress(.step("reconstructing the state at offset \(offset)"))
            let (state, replay) = try searcher.reconstruct(at: offset, progress: progress)
            result.reconstructions += 1
            let violation = invariant.check(state, replay)
            result.checks.append(.init(offset: offset, holds: violation == nil))
            return violation
        }

        // The end first: when the invariant holds there, there is nothing to find.
        guard var badViolation = try check(end) else { return result }
        searcher.discardTrial()
        var good = LogOffset.zero  // the empty log: nothing can be wrong yet
        var bad = end
        while bad.rawValue - good.rawValue > 1 {
            let middle = LogOffset(good.rawValue + (bad.rawValue - good.rawValue) / 2)
            if let violation = try check(middle) {
                bad = middle
                badViolation = violation
                searcher.discardTrial()
            } else {
                good = middle
                searcher.keepTrial()
            }
        }
        result.firstBadOffset = bad
        result.violation = badViolation
        return result
    }

    /// The error for a failure met reading `log`.
    static func failure(_ error: any Error, at offset: LogOffset?, of log: Log) -> DiagnosticsError {
        if let error = error as? DiagnosticsError { return error }
        if let error = error as? LogStoreError {
            let located = error.located(at: offset, in: log)
            let entryFault = error.code == .corruptEntry || error.code == .unknownFormatVersion
            return DiagnosticsError(
                entryFault ? .corruptEntry : .unreadableLog, located.description, offset: located.offset,
                logError: located)
        }
        return DiagnosticsError(.replayFailed, "\(error)", offset: offset)
    }

    /// The scratch logs and folds of a bisection: the one at the last offset known good, and
    /// the one being tried.
    private struct Searcher {
        let source: Log
        let scratch: ScratchDirectory
        let index: (any Projection)?
        /// The scratch log at the last offset known good (`nil`: the empty log), and its fold.
        var good: (directory: URL, log: DeviceLog)?
        var goodReplay = DeviceStateReplay()
        /// The one being tried.
        var trial: (directory: URL, log: DeviceLog)?
        var trialReplay = DeviceStateReplay()
        var serial = 0

        init(source: Log, scratch: ScratchDirectory, index: (any Projection)?) {
            self.source = source
            self.scratch = scratch
            self.index = index
        }

        /// The index's state and the fold at `offset` (past the good one): the good scratch
        /// log copied, then the entries after it appended.
        mutating func reconstruct(
            at offset: LogOffset, progress: (ProgressEvent) -> Void
        ) throws(DiagnosticsError) -> (DeviceState, DeviceStateReplay) {
            serial += 1
            let directory = scratch.url.appendingPathComponent("state-\(serial)", isDirectory: true)
            let start = goodReplay.offset
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                if let good {
                    try FileManager.default.copyItem(
                        at: good.directory.appendingPathComponent("data.mdb"),
                        to: directory.appendingPathComponent("data.mdb"))
                }
            } catch {
                throw DiagnosticsError(.scratchDirectory, "cannot make the scratch log \(directory.path): \(error)")
            }
            let copy: DeviceLog
            do {
                let options = LogEnvironment.Options(durability: .fast, initialMapSize: 1 << 20)
                copy =
                    try index.map { try DeviceLog(directory: directory, options: options, index: $0) }
                    ?? DeviceLog(directory: directory, options: options)
            } catch {
                throw DiagnosticsError(.replayFailed, "cannot open the scratch log \(directory.path): \(error)")
            }
            var replay = goodReplay
            if offset > start {
                var replayer = DeviceLogReplayer(source: source, into: copy)
                try source.walkDeviceEntries(from: start.next, through: offset) {
                    (entry, decoded) throws(DiagnosticsError) in
                    replay.apply(decoded, at: entry.offset)
                    do { try replayer.add(entry) } catch {
                        throw DeviceLogBisect.failure(error, at: entry.offset, of: source)
                    }
                    progress(.entries(done: entry.offset.rawValue, total: offset.rawValue))
                }
                do { try replayer.flush() } catch { throw DeviceLogBisect.failure(error, at: nil, of: source) }
            }
            let state: DeviceState
            do { state = try copy.snapshotState() } catch {
                throw DiagnosticsError(
                    .replayFailed, "reading the state at offset \(offset) failed: \(error)", offset: offset)
            }
            trial = (directory, copy)
            trialReplay = replay
            return (state, replay)
        }

        /// The state tried holds: it becomes the good one.
        mutating func keepTrial() {
            if let good { Self.remove(good) }
            good = trial
            goodReplay = trialReplay
            trial = nil
        }

        /// The state tried fails: it is dropped.
        mutating func discardTrial() {
            if let trial { Self.remove(trial) }
            trial = nil
        }

        private static func remove(_ scratch: (directory: URL, log: DeviceLog)) {
            try? FileManager.default.removeItem(at: scratch.directory)
        }
    }
}

extension DeviceLog {
    /// The first offset after which `invariant` stops holding, found with O(log n) state
    /// reconstructions; see ``DeviceLogBisect``.
    ///
    /// ```swift
    /// let result = try engine.deviceLog.bisect(.pendingChangesKept)
    /// #expect(result.firstBadOffset == nil, "\(result)")
    /// ```
    ///
    /// - Parameters:
    ///   - invariant: What must hold at every offset.
    ///   - through: The last offset to consider; `nil` for the log's last entry.
    ///   - progress: Told of each state reconstruction.
    /// - Throws: ``DiagnosticsError`` naming the offset concerned.
    public func bisect(
        _ invariant: DeviceInvariant, through: LogOffset? = nil, progress: (ProgressEvent) -> Void = { _ in }
    ) throws(DiagnosticsError) -> DeviceBisectResult {
        try DeviceLogBisect(self).run(invariant, through: through, progress: progress)
    }

    /// The first offset after which `holds` is false for the engine's state, found with
    /// O(log n) state reconstructions; see ``DeviceLogBisect``.
    ///
    /// ```swift
    /// let result = try deviceLog.bisect { state in state.pendingRecordZoneChanges.count < 100 }
    /// print(result.firstBadOffset ?? "always held")
    /// ```
    ///
    /// - Parameters:
    ///   - through: The last offset to consider; `nil` for the log's last entry.
    ///   - progress: Told of each state reconstruction.
    ///   - holds: Whether the state (as the device index gives it) is good.
    /// - Throws: ``DiagnosticsError`` naming the offset concerned.
    public func bisect(
        through: LogOffset? = nil, progress: (ProgressEvent) -> Void = { _ in },
        _ holds: @escaping @Sendable (DeviceState) -> Bool
    ) throws(DiagnosticsError) -> DeviceBisectResult {
        let invariant = DeviceInvariant(name: "closure", summary: "the closure given") { state, _ in
            holds(state) ? nil : "the closure returned false for the state at offset \(state.offset)"
        }
        return try DeviceLogBisect(self).run(invariant, through: through, progress: progress)
    }
}
