import ArgumentParser
import Foundation
import LogStore
import LogSync
import LogSyncDiagnostics
import LogToolCore

/// Which log to read: the environment directory and, optionally, the log's name in it.
struct LogLocationOptions: ParsableArguments {
    @Argument(help: "The log's environment directory (the one holding data.mdb).", completion: .directory)
    var path: String

    @Option(
        name: .customLong("log"),
        help: ArgumentHelp(
            "The log in the environment to read (default: the only one there).",
            valueName: "name"))
    var logName: String?

    /// Opens the environment read-only (so another process may be appending) and the log in it.
    func openLog() throws -> Log {
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
        let name = try LogSelection.choose(
            requested: logName, available: try environment.logNames(), path: environment.path)
        return try environment.openLog(named: name)
    }

    /// What to add to an offset of `log` to get the device's: a support bundle's `baseOffset`
    /// for its log `device` (0 unless the bundle is a range export starting past offset 1),
    /// 0 for any other log.
    func offsetBase(of log: Log) throws -> UInt64 {
        guard log.name == DeviceLog.logName,
            try log.environment.logNames().contains(SupportBundle.manifestLogName)
        else { return 0 }
        return try SupportBundle.manifest(at: URL(fileURLWithPath: log.environment.path)).baseOffset
    }
}

/// A range of offsets.
struct OffsetRangeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The first offset to include (default: 1).", valueName: "offset"))
    var from: UInt64?

    @Option(help: ArgumentHelp("The last offset to include (default: the log's last).", valueName: "offset"))
    var to: UInt64?

    func validate() throws {
        if let from, from == 0 { throw ValidationError("offsets start at 1; --from 0 names no entry") }
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
        if let from, let to, to < from { throw ValidationError("--to \(to) is before --from \(from)") }
    }

    var start: LogOffset { LogOffset(from ?? 1) }
    var end: LogOffset? { to.map { LogOffset($0) } }

    /// The range in the offsets of a log whose entries are another's from `base + 1` on (a
    /// support bundle of a range export): the options name the other log's offsets.
    func shifted(by base: UInt64) -> (start: LogOffset, end: LogOffset?) {
        guard base > 0 else { return (start, end) }
        return (LogOffset(max(from ?? 1, base + 1) - base), to.map { LogOffset($0 > base ? $0 - base : 0) })
    }
}

/// Human or machine output.
struct OutputFormatOptions: ParsableArguments {
    @Flag(help: "Write JSON Lines (one object per entry) instead of text.")
    var json = false

    var entryFormat: EntryDumper.Format { json ? .jsonLines : .text }
}

/// `--json` for a command that prints one result.
struct JSONObjectOptions: ParsableArguments {
    @Flag(help: "Write one JSON object (on one line) instead of text.")
    var json = false
}

/// Which entries to print: `--kind` (repeatable), `--record`, `--zone`.
struct EntryFilterOptions: ParsableArguments {
    @Option(
        name: .customLong("kind"),
        help: ArgumentHelp(
            "Print only entries of this kind: a number, or a server or device kind's name such as recordSaved or batchResult (repeat for several kinds).",
            valueName: "kind"))
    var kinds: [String] = []

    @Option(
        help: ArgumentHelp(
            "Print only entries about this record: server entries with it as their record, device entries naming it.",
            valueName: "name"))
    var record: String?

    @Option(
        help: ArgumentHelp(
            "Print only entries about this zone (any owner): server entries with it as their zone, device entries naming it.",
            valueName: "name"))
    var zone: String?

    func validate() throws {
        _ = try entryFilter()
    }

    /// The filter, with kinds named by `decoder`'s names.
    ///
    /// - Throws: `ValidationError` for a kind that is neither a number nor a known name.
    func entryFilter(decoder: EntryDecoder? = .standard) throws -> EntryFilter {
        var filter = EntryFilter(recordName: record, zoneName: zone)
        for kind in kinds {
            do {
                filter.kinds.insert(try EntryFilter.kind(named: kind, decoder: decoder))
            } catch {
                throw ValidationError(error.message)
            }
        }
        return filter
    }
}
