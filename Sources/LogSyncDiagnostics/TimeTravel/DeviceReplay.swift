import Foundation
import LogStore
import LogSync
import LogSyncPlatform

/// `logtool replay`: a device log's engine state at an offset, and optionally a check of its
/// projections.
public enum DeviceReplay {
    /// What `run` found.
    public struct Result: Sendable {
        /// The log's name (`device`) and its environment's directory.
        public var logName: String
        public var path: String
        /// The log's last offset when it was opened.
        public var lastOffset: LogOffset
        /// The engine state after the entries `1...state.offset`.
        public var state: DeviceState
        /// The check of the stored projections, if one was asked for.
        public var verification: Verification?

        /// The text `logtool replay` prints: `replayed entries 1...N of M of log "device" in
        /// PATH`, the state (`DeviceStateReport.text`), and with a successful verification
        /// `projections verified through offset N`. Each line ends in a line break; a failed
        /// verification adds no line (the tool reports it as an error).
        public var text: String {
            var text = "replayed entries 1...\(state.offset) of \(lastOffset) of log \"\(logName)\" in \(path)\n"
            text += DeviceStateReport.text(state)
            if case .verified(let through)? = verification {
                text += "projections verified through offset \(through)\n"
            }
            return text
        }

        /// The JSON object `logtool replay --json` prints, on one line (no line break), keys in
        /// this order: `log`, `path`, `lastOffset`, `state` (`DeviceStateReport.json`),
        /// `verification` (`null` without `--verify`; else `verified`, `through` and, when not
        /// verified, `difference`: the first difference, as the error line names it).
        public var json: String {
            let check: String
            switch verification {
            case nil:
                check = "null"
            case .verified(let through)?:
                check = JSONText.object([("verified", "true"), ("through", JSONText.number(through.rawValue))])
            case .differs(let mismatch)?:
                check = JSONText.object([
                    ("verified", "false"), ("through", JSONText.number(mismatch.offset.rawValue)),
                    ("difference", JSONText.string(mismatch.description)),
                ])
            }
            return JSONText.object([
                ("log", JSONText.string(logName)), ("path", JSONText.string(path)),
                ("lastOffset", JSONText.number(lastOffset.rawValue)), ("state", DeviceStateReport.json(state)),
                ("verification", check),
            ])
        }
    }

    /// The outcome of `Log.verifyProjections()`.
    public enum Verification: Sendable, Hashable {
        /// The stored projections equal their rebuild through this offset.
        case verified(through: LogOffset)
        /// The first difference between a stored projection and its rebuild.
        case differs(ProjectionMismatch)
    }

    /// Opens the device log in `path` read-only, replays its entries `1...end` (`nil`: the
    /// last) into a scratch device log in the system's temporary directory (removed before
    /// returning) and reads the state it gives; with `verify`, then runs
    /// `verifyProjections()` on the log.
    ///
    /// The same state as `DeviceLog.state(at:)`, in one pass that checks each entry as it
    /// copies it, so that a corrupt one is named by its offset in this log.
    ///
    /// - Parameters:
    ///   - path: The device log's directory (the engine's `logDirectory`).
    ///   - end: The last entry to replay; `nil`: the log's last.
    ///   - verify: Whether to verify the stored projections too.
    ///   - progress: Told of each entry replayed, then of the `verifying projections` step.
    /// - Returns: The state; a difference found by the verification is in `verification`, not
    ///   thrown.
    /// - Throws: `LogStoreError` for a missing path, a directory without a log, or a corrupt
    ///   entry (naming its offset); ``DiagnosticsError`` for a log that is not a device log, an
    ///   offset past the end, or a replay that fails in the scratch log.
    public static func run(
        path: String, through end: LogOffset?, verify: Bool, progress: (ProgressEvent) -> Void = { _ in }
    ) throws -> Result {
        // Without --verify only the entries are read, so a log whose index is missing replays too.
        let log = verify ? try openDeviceLog(at: path).log : try openDeviceLogEntries(at: path)
        let (target, last) = try log.range(through: end) { asked, logEnd in
            "offset \(asked) is past the end of the log \"\(log.name)\" in \(log.environment.path), which ends at offset \(logEnd)"
        }
        let scratch = try ScratchDirectory(prefix: "logtool-replay")
        defer { scratch.remove() }
        let copy = try scratch.deviceLog(named: "replay")
        var replayer = DeviceLogReplayer(source: log, into: copy)
        var cursor = try log.entries(from: .first, through: target)
        while let entry = try cursor.next() {
            try checkedDeviceEntry(entry, of: log)
            try replayer.add(entry)
            progress(.entries(done: entry.offset.rawValue, total: target.rawValue))
        }
        try replayer.flush()
        let state = try copy.snapshotState()
        var result = Result(logName: log.name, path: log.environment.path, lastOffset: last, state: state)
        if verify {
            progress(.step("verifying projections"))
            let through = try log.lastOffset
            if let mismatch = try log.verifyProjections() {
                result.verification = .differs(mismatch)
            } else {
                result.verification = .verified(through: through)
            }
        }
        return result
    }

    /// Opens the device log in `path` read-only (so an engine may be appending to it), with its
    /// index.
    ///
    /// - Throws: the log store's error for a missing path, a directory without a log or a log
    ///   without the index's tables; ``DiagnosticsError`` when the environment holds no log named
    ///   `device`.
    public static func openDeviceLog(at path: String) throws -> DeviceLog {
        let environment = try deviceLogEnvironment(at: path)
        return try DeviceLog(directory: URL(fileURLWithPath: environment.path), options: environment.options)
    }

    /// Opens the log named `device` in `path` read-only for its entries only: without the
    /// index, which need not be there.
    ///
    /// - Throws: the log store's error for a missing path or a directory without a log;
    ///   ``DiagnosticsError`` when the environment holds no log named `device`.
    public static func openDeviceLogEntries(at path: String) throws -> Log {
        try deviceLogEnvironment(at: path).openLog(named: DeviceLog.logName)
    }

    private static func deviceLogEnvironment(at path: String) throws -> LogEnvironment {
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
        let names = try environment.logNames()
        guard names.contains(DeviceLog.logName) else {
            let held =
                names.isEmpty
                ? "no logs" : (names.count == 1 ? "the log " : "the logs ") + names.sorted().joined(separator: ", ")
            throw DiagnosticsError(
                .notADeviceLog,
                "\(environment.path) is not a device log: it holds \(held), not a log named \(DeviceLog.logName)")
        }
        if names.contains(SupportBundle.manifestLogName) {
            let manifest = try SupportBundle.manifest(at: URL(fileURLWithPath: environment.path))
            guard manifest.baseOffset == 0 else {
                throw DiagnosticsError(
                    .partialBundle,
                    "\(environment.path) is a support bundle of the device's entries \(manifest.firstOffset)..."
                        + "\(manifest.lastOffset) only: a device's state is rebuilt from offset 1, so replay, diff, "
                        + "timeline, blame and bisect need an export from offset 1 (logtool dump reads this one)")
            }
        }
        return environment
    }

    /// Checks that `entry` decodes as a device entry, as the device log's index will decode
    /// it, and returns its description.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the offset, `log` and its path, for a
    ///   payload that does not decode or a kind that is not a device kind.
    @discardableResult
    static func checkedDeviceEntry(_ entry: LogEntry, of log: Log) throws(LogStoreError) -> EntryDescription {
        let failure: LogStoreError
        do {
            if let description = try DeviceEntryDescription.describe(entry, in: log) { return description }
            failure = LogStoreError(.corruptEntry, "kind \(entry.kind) is not a device entry kind")
        } catch {
            failure = error
        }
        throw failure.located(at: entry.offset, in: log)
    }
}

/// A directory of its own in the system's temporary directory (`PREFIX-XXXXXX`), for scratch
/// logs that are removed at the end of a command.
struct ScratchDirectory {
    let url: URL

    /// - Throws: ``DiagnosticsError`` if the directory cannot be created.
    init(prefix: String) throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let created = mkdtemp(&bytes) else {
            throw DiagnosticsError(
                .scratchDirectory,
                "cannot create a scratch directory in \(FileManager.default.temporaryDirectory.path): \(String(cString: strerror(errno)))"
            )
        }
        url = URL(fileURLWithPath: String(cString: created), isDirectory: true)
    }

    /// A new, empty device log in the subdirectory `name`, with fast (not durable) commits.
    func deviceLog(named name: String) throws -> DeviceLog {
        try DeviceLog(
            directory: url.appendingPathComponent(name, isDirectory: true),
            options: LogEnvironment.Options(durability: .fast, initialMapSize: 1 << 20))
    }

    /// Removes the directory and everything in it.
    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Copies a device log's entries into a scratch device log, whose index rebuilds as they are
/// appended: in batches (`add`, then `flush`), or one at a time (`append`).
///
/// Each copy keeps its entry's kind, time and payload, and so its offset. A failure in the
/// scratch log is reported against the source log's offsets, not the scratch directory (which
/// is removed at the end).
struct DeviceLogReplayer {
    /// The log read, for error messages.
    let source: Log
    /// The scratch log written.
    let copy: DeviceLog
    /// How many entries a batch holds at most.
    var batchSize = 4096
    private var batch: [NewEntry] = []
    private var first: LogOffset?

    init(source: Log, into copy: DeviceLog) {
        self.source = source
        self.copy = copy
    }

    /// Adds `entry` to the batch, appending the batch when it is full.
    mutating func add(_ entry: LogEntry) throws {
        if batch.isEmpty { first = entry.offset }
        batch.append(NewEntry(kind: entry.kind, payload: entry.payload, time: entry.time))
        if batch.count >= batchSize { try flush() }
    }

    /// Appends what the batch holds.
    mutating func flush() throws {
        guard let first, !batch.isEmpty else { return }
        let last = LogOffset(first.rawValue + UInt64(batch.count) - 1)
        do {
            try copy.log.append(batch)
        } catch {
            throw DiagnosticsError(
                .replayFailed,
                "replaying entries \(first)...\(last) of log \"\(source.name)\" in \(source.environment.path) failed: \(error)"
            )
        }
        batch.removeAll(keepingCapacity: true)
        self.first = nil
    }

    /// Appends `entry` at once (after any batch).
    mutating func append(_ entry: LogEntry) throws {
        try add(entry)
        try flush()
    }
}
