import ArgumentParser
import LogStore
import LogToolCore

/// `logtool dump LOG [--log NAME] [--from N] [--to M] [--json]`
struct Dump: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a log's entries, one line each.",
        discussion: """
            Each text line shows the offset, the time (ISO 8601 UTC, microseconds), the kind, \
            the payload size in bytes, and the first 16 payload bytes in hex and as printable \
            ASCII between bars ('.' for other bytes, '…' after them when the payload is longer).

            --json writes JSON Lines: one object per entry with the keys offset, time, \
            timeMicros, kind, size and payloadBase64 (the whole payload, base 64).

            A corrupt entry stops the dump: the entries before it are printed, then one line \
            on standard error naming its offset, and the exit status is 1. See Docs/logtool.md.
            """)

    @OptionGroup var location: LogLocationOptions
    @OptionGroup var range: OffsetRangeOptions
    @OptionGroup var output: OutputFormatOptions

    func run() async throws {
        try reportingErrors { standardOutput in
            let log = try location.openLog()
            try EntryDumper(format: output.entryFormat).dump(
                log, from: range.start, through: range.end, to: &standardOutput)
        }
    }
}
