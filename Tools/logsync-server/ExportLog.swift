import ArgumentParser
import Foundation
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server export-log --user U [--from N] [--to M] (--bundle B | --key-file F) --output E`:
/// a user's server logs, redacted as their device's support bundle is (Docs/Privacy.md).
struct ExportLog: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-log",
        abstract:
            "Write a redacted extract of a user's private and shared databases, to read beside their device's support bundle.",
        discussion: """
            The extract (a LogStore directory, conventionally NAME.lsb) holds the user's server \
            log entries with every record, zone and owner name, field value, error message and \
            asset digest replaced by a keyed hash, as the device's support bundle holds its own: \
            with --bundle, the key and settings are read from that bundle's manifest, so a record \
            is named alike in both and `logtool timeline BUNDLE.lsb EXTRACT.lsb` links the \
            device's requests to the server's entries. The key itself is never written into the \
            extract, only its ID. --key-file names a file holding a key (32 bytes in base64) \
            instead, with values and names redacted.

            --from and --to keep the offsets in that range of each database's log (every entry \
            without them), moved back to the first entry of the commit holding --from; a range is \
            written from offset 1 of the extract, its manifest giving the base offset. Nothing is written when anything fails (an unknown user, a range past \
            the end of every log, an entry that does not decode, a bad bundle or key).

                logsync-server export-log --data ./data --user alice --bundle report.lsb --output server.lsb
            """)

    @OptionGroup var data: DataOptions

    @Option(name: .long, help: ArgumentHelp("The user whose databases to export.", valueName: "user"))
    var user: String

    @Option(
        name: .long, help: ArgumentHelp("The first offset of each log to export (default: 1).", valueName: "offset"))
    var from: UInt64?

    @Option(
        name: .long,
        help: ArgumentHelp("The last offset of each log to export (default: its last).", valueName: "offset"))
    var to: UInt64?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The device's support bundle whose manifest gives the key and redaction settings.", valueName: "bundle"))
    var bundle: String?

    @Option(name: .long, help: ArgumentHelp("A file holding the key, 32 bytes in base64.", valueName: "file"))
    var keyFile: String?

    @Option(name: .long, help: ArgumentHelp("The extract's directory, which must not exist.", valueName: "path"))
    var output: String

    func validate() throws {
        if (bundle == nil) == (keyFile == nil) { throw ValidationError("give --bundle or --key-file, one of them") }
        if let from, from == 0 { throw ValidationError("offsets start at 1; --from 0 names no entry") }
        if let to, to == 0 { throw ValidationError("offsets start at 1; --to 0 names no entry") }
        if let from, let to, to < from { throw ValidationError("--to \(to) is before --from \(from)") }
    }

    func run() throws {
        let summary = try exitingOnError { () -> ServerExtract.Summary in
            let redactor =
                if let bundle {
                    try ServerExtract.redactor(forBundleAt: URL(fileURLWithPath: bundle)).redactor
                } else {
                    try ServerExtract.redactor(keyFile: URL(fileURLWithPath: keyFile!), settings: .init())
                }
            // The store only: no token file or session is read, and nothing is created.
            let location = try data.location
            var directory = URL(fileURLWithPath: NSTemporaryDirectory())
            if case .lmdb(let lmdb) = location {
                guard FileManager.default.fileExists(atPath: lmdb.path) else {
                    throw ValidationError("the data directory \(lmdb.path) does not exist")
                }
                directory = lmdb
            }
            let storage = try data.storage(
                logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
            let server = try SyncServer(SyncServer.Configuration(directory: directory), storage: storage)
            defer { server.shutdown() }
            return try ServerExtract.export(
                server, user: UserID(user), from: from, through: to, redactor: redactor,
                to: URL(fileURLWithPath: output))
        }
        let scopes = summary.manifest.scopes.sorted { $0.key < $1.key }.map { name, range in
            range.lastOffset == 0 ? "\(name): none" : "\(name): \(range.firstOffset)...\(range.lastOffset)"
        }
        print(
            "wrote \(summary.entryCount) entries of \(user) (\(scopes.joined(separator: ", "))) to \(output), key \(summary.manifest.keyID)"
        )
    }
}
