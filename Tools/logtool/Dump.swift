import ArgumentParser
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool dump LOG [--log NAME] [--from N] [--to M] [--kind K …] [--record NAME] [--zone NAME] [--json]`
struct Dump: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a log's entries, one line each.",
        discussion: """
            Each text line shows the offset, the time (ISO 8601 UTC, microseconds), the kind \
            and the payload size in bytes. For a server entry (kinds 101–115 and 118–119 of a database log \
            such as DATA/users/u1 --log private, kinds 120–121 of the registry DATA/registry) and for \
            a device entry (kinds 1–99 of an engine's device log, the log named device) the line \
            goes on with the kind's name and its fields as name=value, for example \
            "recordSaved  zone=Notes record=n1 type=Note tag=12 keys=[body,title]" or \
            "batchResult  saved=1 deleted=0 failed=1 records=[Notes/n2] errors=[n1:serverRecordChanged]". \
            For any other entry it shows the first 16 payload bytes in hex and as printable ASCII between \
            bars ('.' for other bytes, '…' after them when the payload is longer).

            --json writes JSON Lines: one object per entry with the keys offset, time, \
            timeMicros, kind, size and payloadBase64 (the whole payload, base 64), and for a \
            server or device entry kindName and fields (an object of the same fields).

            --kind, --record and --zone keep only matching entries; they combine (all must \
            hold), and --kind may repeat (any of the kinds).

            A corrupt entry stops the dump: the entries before it are printed, then one line \
            on standard error naming its offset, and the exit status is 1.

            When standard error is a terminal and standard output is not, a status line on \
            standard error shows how many entries have been read. See Docs/logtool.md.
            """)

    @OptionGroup var location: LogLocationOptions
    @OptionGroup var range: OffsetRangeOptions
    @OptionGroup var filter: EntryFilterOptions
    @OptionGroup var output: OutputFormatOptions

    func run() async throws {
        try reportingErrors { standardOutput in
            // A dump to the screen shows its own progress, and a status line would break its lines.
            var progress = ProgressIndicator.standardError(label: "dump", total: nil, also: !isTerminal(1))
            defer { progress.finish() }
            let log = try location.openLog()
            let formatter = EntryFormatter(decoder: .forLog(log))
            var dumper = EntryDumper(format: output.entryFormat, formatter: formatter, filter: try filter.entryFilter())
            // A support bundle of a range export: its entries shown, and chosen, by the device's offsets.
            dumper.offsetBase = try location.offsetBase(of: log)
            let (start, end) = range.shifted(by: dumper.offsetBase)
            try dumper.dump(log, from: start, through: end, to: &standardOutput) { progress.report($0) }
        }
    }
}
