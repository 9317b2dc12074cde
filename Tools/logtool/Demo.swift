import ArgumentParser
import Foundation
import KeyValueLog
import LogStore
import LogSyncDiagnostics
import LogToolCore

/// `logtool demo [--dir PATH]`: writes a short key–value story to a new log and dumps it.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a small demo log, print its dump and how to dump it again.",
        discussion: """
            The demo log holds a shopping list kept as key–value entries (kinds: 1 set, 2 remove, \
            3 note), with the "latest" projection (each key's latest value) updated in the same \
            transaction as every append.
            """)

    @Option(
        help: ArgumentHelp(
            "A new or empty directory for the log (default: a new directory in the system's temporary directory).",
            valueName: "path"),
        completion: .directory)
    var dir: String?

    func run() async throws {
        try reportingErrors { output in
            let directory = try dir.map(Self.checkedDirectory) ?? Self.newTemporaryDirectory()
            let log = try Log.open(at: directory, projections: [LatestValueProjection()])
            let count = try DemoStory.write(to: log)
            let path = log.environment.path

            output.write("Wrote a demo log of \(count) entries to \(path)\n")
            output.write("Kinds: 1 set (key length, key, value), 2 remove (key length, key), 3 note (text).\n\n")
            try EntryDumper().dump(log, to: &output)
            output.write("\nLatest values (projection \"latest\"):\n")
            let values = try log.read { try LatestValueProjection.allValues(in: $0) }
            for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                output.write("  \(key) = \(DemoStory.describe(value))\n")
            }
            output.write("\nDump it again with:\n  swift run logtool dump \(shellQuoted(path))\n")
        }
    }

    /// `path` if it is missing or an empty directory; the demo never writes into a log or
    /// directory that holds anything already.
    static func checkedDirectory(_ path: String) throws -> URL {
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { return url }
        guard isDirectory.boolValue, (try FileManager.default.contentsOfDirectory(atPath: url.path)).isEmpty else {
            throw LogToolError("\(url.path) is not an empty directory; give --dir a new or empty directory")
        }
        return url
    }

    /// A new directory `logtool-demo-XXXXXX` in the system's temporary directory.
    static func newTemporaryDirectory() throws -> URL {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("logtool-demo-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let created = mkdtemp(&bytes) else {
            throw LogToolError("cannot create a directory like \(template): \(String(cString: strerror(errno)))")
        }
        return URL(fileURLWithPath: String(cString: created))
    }
}

/// The demo's story: a shopping list edited over a few transactions.
enum DemoStory {
    /// Each inner array is appended in one write transaction.
    static let transactions: [[KeyValueEntry]] = [
        [
            .note(Array("demo: a shopping list kept as a key-value log".utf8)),
            .set(key: "title", value: Array("Weekend".utf8)),
        ],
        [.set(key: "milk", value: Array("2 litres".utf8)), .set(key: "bread", value: Array("1 loaf".utf8))],
        [.set(key: "milk", value: Array("1 litre".utf8))],
        [.remove(key: "bread")],
        [.set(key: "eggs", value: withUnsafeBytes(of: UInt32(12).bigEndian) { Array($0) })],
        [.note(Array("bought everything; the list stays in the log".utf8))],
    ]

    /// Appends the story, one transaction per step, and returns the number of entries.
    static func write(to log: Log) throws -> Int {
        for entries in transactions { try log.append(entries.map(\.newEntry)) }
        return transactions.joined().count
    }

    /// A value as quoted text when printable, otherwise as hex.
    static func describe(_ value: [UInt8]) -> String {
        value.allSatisfy({ (0x20..<0x7F).contains($0) })
            ? "\"\(String(decoding: value, as: UTF8.self))\""
            : "0x" + EntryFormatter.hex(value).replacingOccurrences(of: " ", with: "")
    }
}
