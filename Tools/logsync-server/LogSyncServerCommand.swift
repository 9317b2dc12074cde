import ArgumentParser
import Foundation
import LogStore
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server`: a LogSync server over HTTP. One subcommand per file in this directory.
@main
struct LogSyncServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logsync-server",
        abstract: "Serve LogSync databases over HTTP or HTTPS, with push and bearer-token authentication.",
        discussion: """
            With no subcommand, `serve` runs: `logsync-server --data DIR --port N` serves DIR on \
            127.0.0.1:N. `logsync-server serve --help` explains every flag of the server.

            Add a user first with `logsync-server user add USER --data DIR`, which prints the \
            user's bearer token; devices send it as `Authorization: Bearer <token>`. \
            `logsync-server user revoke USER` takes the user's tokens away, on a running server \
            too, within a second. Docs/Protocol.md describes the routes and the token file.

            Several nodes can serve one PostgreSQL database: `--store postgres://user@host/db` \
            (or LOGSYNC_STORE) on each; tokens then live in the database. `logsync-server \
            migrate` moves an LMDB directory there (Docs/Deployment.md).

            With --admin-token-file the server also serves a read-only console at /console; \
            `logsync-server console-link` prints a link into it for a browser, and \
            `logsync-server status` prints the same overview in the terminal.
            """,
        subcommands: [
            Serve.self, User.self, Sessions.self, AdminToken.self, Migrate.self, CollectAssets.self, Schema.self,
            Bundles.self,
            DevIssuer.self, Status.self, ConsoleLink.self, ExportLog.self,
        ],
        defaultSubcommand: Serve.self)
}

/// The options every subcommand that touches the server's data shares: where it is stored.
struct DataOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The server's data directory: one LMDB environment per user, plus the token file. Created if missing. The same as --store lmdb:DIR.",
            valueName: "dir"))
    var data: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Where the data is kept: lmdb:DIR (the default store, on this machine's disk) or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, which several nodes can share (several HOST[:PORT] separated by commas with ?target_session_attrs=read-write follow the primary across a failover); tokens are then kept in the database too. Default: the LOGSYNC_STORE environment variable.",
            valueName: "store"))
    var store: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With a PostgreSQL store: how many requests run against the database at once (the node opens up to twice as many connections, plus one).",
            valueName: "n"))
    var connections = 16

    @Option(
        name: .long,
        help: ArgumentHelp(
            "With a PostgreSQL store: a streaming replica of its database (postgres://…). Fetches read it when it has replayed past their change token, the primary otherwise; writes always go to the primary.",
            valueName: "url"))
    var replicaURL: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The token file (\"sha256:<digest of the token> <user ID>\" per line) of an LMDB store. Default: <dir>/tokens.",
            valueName: "file"))
    var tokens: String?

    @Option(
        name: .customLong("cluster"),
        help: ArgumentHelp(
            "Another PostgreSQL cluster holding users, as NAME=postgres://…; repeat it for each. The --store database is then the directory (cluster \"main\"), which keeps the registry, sessions, tokens and which cluster holds each user.",
            valueName: "name=url"))
    var clusters: [String] = []

    /// Where the data is kept.
    enum Location: CustomStringConvertible {
        case lmdb(URL)
        case postgres(String)

        var description: String {
            switch self {
            case .lmdb(let directory): "lmdb:\(directory.path)"
            case .postgres(let url): (try? PostgresURL(url).description) ?? "postgres://…"
            }
        }
    }

    /// The store named by --store, --data or LOGSYNC_STORE, in that order.
    var location: Location {
        get throws {
            let text = store ?? data.map { "lmdb:\($0)" } ?? ProcessInfo.processInfo.environment["LOGSYNC_STORE"]
            guard let text, !text.isEmpty else {
                throw ValidationError("say where the data is: --data DIR, --store lmdb:DIR or --store postgres://…")
            }
            return try Self.location(text, option: "--store")
        }
    }

    /// The store `text` names: `lmdb:DIR` or `postgres://…`, or also a plain directory when
    /// `plainDirectory` is set; `option` names the option in errors.
    static func location(_ text: String, option: String, plainDirectory: Bool = false) throws -> Location {
        if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            _ = try PostgresURL(text)  // a malformed URL fails here, naming what is wrong
            return .postgres(text)
        }
        if text.hasPrefix("lmdb:") || (plainDirectory && !text.isEmpty) {
            let path = text.hasPrefix("lmdb:") ? String(text.dropFirst("lmdb:".count)) : text
            guard !path.isEmpty else {
                throw ValidationError("\(option) lmdb: needs a directory, as in lmdb:/var/lib/logsync")
            }
            return .lmdb(URL(fileURLWithPath: path, isDirectory: true))
        }
        throw ValidationError(
            "\(option) must be \(plainDirectory ? "DIR, " : "")lmdb:DIR or postgres://…, not \"\(text)\"")
    }

    /// The storage at `location`: an LMDB directory (created if missing) or a PostgreSQL store
    /// opening up to about `connections` connections.
    static func storage(
        _ location: Location, connections: Int, durability: Durability = .durable, logger: Logger
    ) throws -> any ServerStorage {
        switch location {
        case .lmdb(let directory):
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return try LMDBStorage(directory: directory, durability: durability)
        case .postgres(let url):
            return try PostgresStorage(url: url, connections: connections, logger: logger)
        }
    }

    /// The storage these options name: with --cluster, the users partitioned across the clusters.
    func storage(durability: Durability = .durable, logger: Logger) throws -> any ServerStorage {
        guard !clusters.isEmpty, case .postgres(let url) = try location else {
            if case .postgres(let url) = try location, let replicaURL {
                return try PostgresStorage(url: url, replicaURL: replicaURL, connections: connections, logger: logger)
            }
            return try Self.storage(location, connections: connections, durability: durability, logger: logger)
        }
        return try Self.partitioned(directory: url, clusters: clusters, connections: connections, logger: logger)
    }

    func validate() throws {
        if store != nil, data != nil { throw ValidationError("give --data or --store, not both") }
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1, not \(connections)") }
        if let replicaURL {
            guard case .postgres = try location else { throw ValidationError("--replica-url needs a PostgreSQL store") }
            guard clusters.isEmpty else {
                throw ValidationError("--replica-url names one database's replica; it cannot be used with --cluster")
            }
            _ = try PostgresURL(replicaURL)  // a malformed URL fails here, naming what is wrong
        }
        if !clusters.isEmpty, case .lmdb = try location {
            throw ValidationError("--cluster needs a PostgreSQL --store (the directory)")
        }
        if case .postgres = try location, tokens != nil {
            throw ValidationError("--tokens is for an LMDB store; a PostgreSQL store keeps its tokens in the database")
        }
    }

    /// The token file of an LMDB store.
    func tokensURL(in directory: URL) -> URL {
        tokens.map { URL(fileURLWithPath: $0) } ?? directory.appendingPathComponent("tokens")
    }

    /// A server on the store, and the token store it implies: LMDB in its directory with a
    /// token file, or PostgreSQL with the tokens in its database (the directory is then unused).
    /// Either accepts the access tokens of the store's sessions, which last `sessionLifetimes`.
    func server(
        durability: Durability = .durable, sessionLifetimes: SessionStore.Lifetimes = .init(), logger: Logger,
        configure: (inout SyncServer.Configuration) -> Void = { _ in }
    ) throws -> (server: SyncServer, tokens: TokenStore) {
        let storage: any ServerStorage
        let directory: URL
        switch try location {
        case .lmdb(let lmdbDirectory):
            try FileManager.default.createDirectory(at: lmdbDirectory, withIntermediateDirectories: true)
            storage = try LMDBStorage(directory: lmdbDirectory, durability: durability)
            directory = lmdbDirectory
        case .postgres:
            storage = try self.storage(durability: durability, logger: logger)
            directory = URL(fileURLWithPath: NSTemporaryDirectory())
        }
        var configuration = SyncServer.Configuration(directory: directory, durability: durability)
        configure(&configuration)
        let server = try SyncServer(configuration, storage: storage)
        let sessions = try SessionStore(server: server, lifetimes: sessionLifetimes)
        let tokens: TokenStore
        if let stored = storage.tokens {
            tokens = TokenStore(stored: stored, logger: logger, sessions: sessions)
        } else {
            tokens = try TokenStore(file: tokensURL(in: directory), logger: logger, sessions: sessions)
        }
        return (server, tokens)
    }
}

/// Runs a subcommand's `body`; an error is one line on standard error (`logsync-server: error:`
/// and, for a `SyncError`, its message alone) and exit status 1.
func exitingOnError<R>(_ body: () throws -> R) throws -> R {
    do {
        return try body()
    } catch let error as SyncError {
        FileHandle.standardError.write(Data("logsync-server: error: \(error.message)\n".utf8))
        throw ExitCode.failure
    } catch {
        FileHandle.standardError.write(Data("logsync-server: error: \(error)\n".utf8))
        throw ExitCode.failure
    }
}
