import ArgumentParser
import Foundation
import Logging
import LogStore
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import SyncModel

/// `logsync-server migrate --from lmdb:DIR --to postgres://…`: moves a server's data from its
/// LMDB store into an empty PostgreSQL store.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a server's data from an LMDB store into an empty PostgreSQL store.",
        discussion: """
            Stop the node first. Every log is copied with the same offsets, kinds, times and \
            payloads: the registry (so users keep their numbers) and each user's private and \
            shared databases (so change tokens and request IDs keep their meaning); the token \
            file's digests go into the database (tokens kept in the clear are hashed). Devices \
            that synced against the LMDB node continue against the PostgreSQL nodes without a \
            reset, with the tokens they have.

            The LMDB directory is opened read-only and left as it was. A target holding any \
            entry or token is refused before anything is written. Prints one line per log \
            ("u12/private: 1234 entries") and a total, then checks that every log ends at the \
            same offset on both sides.

                logsync-server migrate --from lmdb:/var/lib/logsync --to postgres://logsync@db/logsync
            """)

    /// The LMDB store to copy, `lmdb:DIR` or `DIR`.
    @Option(name: .long, help: ArgumentHelp("The LMDB store to copy: lmdb:DIR (or DIR).", valueName: "lmdb:dir"))
    var from: String

    /// The PostgreSQL URL of the empty target.
    @Option(name: .long, help: ArgumentHelp(
        "The empty PostgreSQL store to fill: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE. Its schema is created if missing.",
        valueName: "url"))
    var to: String

    /// The token file, when it is not `DIR/tokens`.
    @Option(name: .long, help: ArgumentHelp("The LMDB store's token file. Default: <dir>/tokens.", valueName: "file"))
    var tokens: String?

    /// The source directory named by --from.
    var sourceDirectory: URL {
        get throws {
            let path = from.hasPrefix("lmdb:") ? String(from.dropFirst("lmdb:".count)) : from
            guard !path.isEmpty else { throw ValidationError("--from needs a directory, as in lmdb:/var/lib/logsync") }
            return URL(fileURLWithPath: path, isDirectory: true)
        }
    }

    /// Refuses an empty --from and a --to that is not a well-formed PostgreSQL URL, before
    /// anything is opened.
    func validate() throws {
        _ = try sourceDirectory
        guard to.hasPrefix("postgres://") || to.hasPrefix("postgresql://") else {
            throw ValidationError("--to must be a postgres:// URL, not \"\(to)\"")
        }
        _ = try PostgresURL(to)
    }

    /// Runs the migration; an error is one line on standard error and exit status 1.
    func run() throws {
        try exitingOnError {
            let directory = try sourceDirectory
            let tokenFile = tokens.map { URL(fileURLWithPath: $0) } ?? directory.appendingPathComponent("tokens")
            try StoreMigration(source: directory, tokenFile: tokenFile, target: to).run { print($0) }
        }
    }
}

/// Why a migration refused to start or found the copy wrong: each case names the path, log or
/// offsets at fault.
enum MigrationError: Error, CustomStringConvertible {
    /// The source directory does not exist.
    case sourceMissing(path: String)
    /// The source directory holds no server data (`registry` is missing).
    case notAServerDirectory(path: String)
    /// A user's environment holds a log that is not a database scope.
    case unknownLog(path: String, name: String)
    /// The target holds entries or tokens already: the logs that are not empty, by name, and
    /// the number of tokens.
    case targetNotEmpty(logs: [String: UInt64], tokens: Int)
    /// After copying, a log does not end at the same offset on both sides.
    case verificationFailed(log: String, source: UInt64, target: UInt64?)

    /// One line naming what is wrong and where.
    var description: String {
        switch self {
        case .sourceMissing(let path):
            "the source directory \(path) does not exist"
        case .notAServerDirectory(let path):
            "\(path) holds no logsync-server data (there is no \(path)/registry)"
        case .unknownLog(let path, let name):
            "\(path) holds a log named \"\(name)\", which is not a database scope (private, shared, public)"
        case .targetNotEmpty(let logs, let tokens):
            "the target database is not empty: "
                + (logs.sorted { $0.key < $1.key }.prefix(5).map { "\($0.key) ends at offset \($0.value)" }
                   + (tokens > 0 ? ["\(tokens) tokens"] : [])).joined(separator: ", ")
                + (logs.count > 5 ? ", …" : "") + "; migrate only into an empty database (nothing was written)"
        case .verificationFailed(let log, let source, let target):
            "log \(log) ends at offset \(source) in the source but at \(target.map(String.init) ?? "no log") in the target"
                + (source > (target ?? 0) ? " (was the node stopped? drop and create the database, then migrate again)" : "")
        }
    }
}

/// One copy of an LMDB store into a PostgreSQL store: finds every log of the source (read-only),
/// refuses a non-empty target, copies the logs and the token file's digests, and verifies.
struct StoreMigration {
    /// The LMDB store's directory.
    let source: URL
    /// Its token file (may be absent: no tokens to copy).
    let tokenFile: URL
    /// The PostgreSQL URL.
    let target: String

    /// A log of the source, open read-only.
    struct SourceLog {
        /// The log's name in either store (`registry`, `u12/private`).
        let name: ServerLogName
        /// The LMDB log.
        let log: Log
    }

    /// Runs the migration, reporting each line of progress to `report`.
    func run(report: (String) -> Void) throws {
        let logs = try sourceLogs()
        let digests = try tokenDigests()
        let storage = try PostgresStorage(
            url: target, connections: 1, logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
        defer { storage.shutdown() }
        let stored = try storage.storedLogs().filter { $0.value > 0 }
        let tokenCount = try storage.tokens?.count() ?? 0
        guard stored.isEmpty, tokenCount == 0 else { throw MigrationError.targetNotEmpty(logs: stored, tokens: tokenCount) }

        var total: UInt64 = 0
        var expected: [String: UInt64] = [:]
        for source in logs {
            let last = try source.log.lastOffset.rawValue
            var cursor = try source.log.entries(through: LogOffset(last))
            let count = try storage.importLog(source.name, projection: source.name.serverProjection, next: { try cursor.next() })
            expected[source.name.description] = last
            total += count
            report("\(source.name): \(count) \(count == 1 ? "entry" : "entries")")
        }
        for (digest, user) in digests.sorted(by: { $0.key < $1.key }) {
            try storage.tokens!.add(digest: digest, user: user)
        }
        // Both sides read again: a source that grew meanwhile (a node still running) fails here.
        let copied = try storage.storedLogs()
        for source in logs {
            let name = source.name.description
            let last = try source.log.lastOffset.rawValue
            guard last == expected[name], copied[name] == last else {
                throw MigrationError.verificationFailed(log: name, source: last, target: copied[name])
            }
        }
        report("total: \(total) \(total == 1 ? "entry" : "entries") in \(logs.count) logs, \(digests.count) \(digests.count == 1 ? "token" : "tokens"); every log ends at the same offset in both stores")
    }

    /// The registry and every user's logs, in order (registry, then users by number), opened
    /// read-only so the source is never written.
    func sourceLogs() throws -> [SourceLog] {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: source.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError.sourceMissing(path: source.path)
        }
        let registryDirectory = LMDBStorage.registryDirectory(in: source)
        guard fileManager.fileExists(atPath: registryDirectory.path) else {
            throw MigrationError.notAServerDirectory(path: source.path)
        }
        let readOnly = LogEnvironment.Options(readOnly: true)
        var logs = [SourceLog(name: .registry, log: try Log.open(at: registryDirectory, named: LMDBStorage.registryLogName, options: readOnly))]
        let usersDirectory = LMDBStorage.usersDirectory(in: source)
        let entries = (try? fileManager.contentsOfDirectory(atPath: usersDirectory.path)) ?? []
        let numbers = entries.compactMap { name -> UInt64? in
            guard name.hasPrefix("u") else { return nil }
            return UInt64(name.dropFirst())
        }.sorted()
        for number in numbers {
            let directory = LMDBStorage.userDirectory(in: source, number: number)
            let environment = try LogEnvironment.open(at: directory, options: readOnly)
            for name in try environment.logNames().sorted() {
                guard let scope = DatabaseScope.allCases.first(where: { $0.description == name }) else {
                    throw MigrationError.unknownLog(path: directory.path, name: name)
                }
                logs.append(SourceLog(name: .database(user: number, scope: scope), log: try environment.openLog(named: name)))
            }
        }
        return logs
    }

    /// The token file's digests (`sha256:<hex>`) and users; tokens kept in the clear are hashed.
    /// No file, no tokens.
    func tokenDigests() throws -> [String: UserID] {
        guard FileManager.default.fileExists(atPath: tokenFile.path) else { return [:] }
        let contents = try TokenStore.parse(String(contentsOf: tokenFile, encoding: .utf8), path: tokenFile.path)
        return Dictionary(uniqueKeysWithValues: contents.users.map { ($0.key.description, $0.value) })
    }
}
