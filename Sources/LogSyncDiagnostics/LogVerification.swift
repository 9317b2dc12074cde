import Foundation
import LogStore

/// What `logtool verify` checks and prints: the structure of an environment's file
/// (`LogEnvironment.checkStructure()`, Docs/LogFormat.md), then every entry of its logs
/// (checksums, dense offsets, the tail record).
public struct LogVerification: Sendable {
    /// One log's entries, all read and verified.
    public struct LogResult: Sendable, Hashable {
        public var name: String
        public var lastOffset: LogOffset
    }

    public var path: String
    public var structure: StructureReport
    public var logs: [LogResult]

    /// Opens the environment in `path` read-only (its structure is checked at open), checks its
    /// structure again in a read transaction for the report, then reads every entry of the log
    /// `logName`, or of every log in the environment.
    ///
    /// - Parameters:
    ///   - path: The directory holding the LMDB environment.
    ///   - logName: The log to read, or `nil` for every log in the environment.
    ///   - progress: Told of each entry read.
    /// - Throws: `LogStoreError`: `.corruptFile` naming the page (and the entry's offset, where
    ///   known), `.corruptEntry` or `.unknownFormatVersion` naming the offset of a bad entry,
    ///   `.missingPath` or `.notALog` for a directory without a log.
    public static func run(
        path: String, logName: String? = nil, progress: (ProgressEvent) -> Void = { _ in }
    ) throws -> LogVerification {
        let environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
        progress(.step("checking the structure"))
        let structure = try environment.checkStructure()
        let names = try logName.map { [$0] } ?? environment.logNames().sorted()
        var logs: [LogResult] = []
        for name in names {
            let log = try environment.openLog(named: name)
            let last = try log.lastOffset
            var cursor = try log.entries(from: .first, through: last)
            while let entry = try cursor.next() {
                progress(.entries(done: entry.offset.rawValue, total: last.rawValue))
            }
            logs.append(LogResult(name: name, lastOffset: last))
        }
        return LogVerification(path: environment.path, structure: structure, logs: logs)
    }

    /// The text `logtool verify` prints, lines ending in line breaks: the file and its
    /// snapshot, one row per table (depth, branch, leaf and overflow pages, entries), then one
    /// line per log.
    public var text: String {
        let s = structure
        var text =
            "structure of \(s.file) verified: page size \(s.pageSize), transaction \(s.transactionID), "
            + "\(s.pagesInUse) pages in use, \(s.freePages) free, \(s.lastPage + 1) in the snapshot, file \(s.fileSize) bytes\n"
        let header = ["table", "depth", "branch", "leaf", "overflow", "entries"]
        let rows = s.tables.map {
            [
                $0.name, String($0.depth), String($0.branchPages), String($0.leafPages), String($0.overflowPages),
                String($0.entries),
            ]
        }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max()! }
        for row in [header] + rows {
            let cells = row.indices.map { column in
                column == 0
                    ? rightPadded(row[column], width: widths[column]) : leftPadded(row[column], width: widths[column])
            }
            text += "  " + cells.joined(separator: "  ") + "\n"
        }
        for log in logs {
            text +=
                log.lastOffset == .zero
                ? "log \"\(log.name)\" verified: empty\n"
                : "log \"\(log.name)\" verified: entries 1...\(log.lastOffset) (checksums, dense offsets, tail record)\n"
        }
        return text
    }
}
