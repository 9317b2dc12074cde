import ArgumentParser
import Foundation
import LogSyncHTTPServer
import LogSyncPostgres
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server migrate --from lmdb:DIR --to postgres://…`: moves a server's data from its
/// LMDB store into an empty PostgreSQL store.
struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a server's data from an LMDB store into an empty PostgreSQL store.",
        discussion: """
            Stop the node first. Every log is copied with the same offsets, kinds, times and \
            payloads: the registry (so users keep their numbers), the devices' sessions (so \
            signed-in devices stay signed in) and each user's private and \
            shared databases (so change tokens and request IDs keep their meaning); the token \
            file's digests go into the database (tokens kept in the clear are hashed); every \
            stored asset content (users/u<N>/assets/<digest>) is copied piece by piece, and \
            each copy is read back and checked against its size and SHA-256 (partial uploads \
            are not copied: their devices upload again). Devices that synced against the LMDB \
            node continue against the PostgreSQL nodes without a reset, with the tokens they \
            have.

            The LMDB directory is opened read-only and left as it was. A target holding any \
            entry, token or asset is refused before anything is written. Prints one line per \
            log ("u12/private: 1234 entries") and per user with assets ("u12/assets: 3 \
            contents, 5242880 bytes") and a total, then checks that every log ends at the same \
            offset and every user keeps the same assets on both sides.

                logsync-server migrate --from lmdb:/var/lib/logsync --to postgres://logsync@db/logsync
            """)

    /// The LMDB store to copy, `lmdb:DIR` or `DIR`.
    @Option(name: .long, help: ArgumentHelp("The LMDB store to copy: lmdb:DIR (or DIR).", valueName: "lmdb:dir"))
    var from: String

    /// The PostgreSQL URL of the empty target.
    @Option(
        name: .long,
        help: ArgumentHelp(
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
            try StoreMigration(source: directory, tokenDigests: try tokenDigests(in: tokenFile), target: to).run {
                print($0)
            }
        }
    }

    /// The token file's digests (`sha256:<hex>`) and users; tokens kept in the clear are hashed.
    /// No file, no tokens.
    func tokenDigests(in tokenFile: URL) throws -> [String: UserID] {
        guard FileManager.default.fileExists(atPath: tokenFile.path) else { return [:] }
        let contents = try TokenStore.parse(String(contentsOf: tokenFile, encoding: .utf8), path: tokenFile.path)
        return Dictionary(uniqueKeysWithValues: contents.users.map { ($0.key.description, $0.value) })
    }
}
