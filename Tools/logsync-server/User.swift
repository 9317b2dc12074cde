import ArgumentParser
import Foundation
import LogSyncHTTPServer
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server user`: the users of the token file.
struct User: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the users who may connect.",
        subcommands: [Add.self, Revoke.self, Rehash.self])

    /// `logsync-server user add USER`: a new token for a user.
    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give USER a new bearer token, append its digest to the token file and print it.",
            discussion: """
                The token is printed alone on standard output, for scripts:

                    TOKEN=$(logsync-server user add alice --data ./data)

                With --email, the user is also registered in the data directory with that e-mail \
                address, by which share owners invite them (`user add bob --email bob@example.com`). \
                Adding a user again with another address changes it; an address another user has is \
                refused.

                The token file keeps only the token's SHA-256 digest, so this is the only time the \
                token is shown. A user may have several tokens (one per device, say). A running \
                server picks up the new token on its next request that presents it. The token file \
                is created readable by its owner only; keep it private.
                """)

        @Argument(
            help: ArgumentHelp(
                "The user ID, such as an e-mail address: 1 to 511 bytes of UTF-8 without control characters or surrounding spaces.",
                valueName: "user"))
        var user: String

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The user's e-mail address, by which share owners invite them (registered in the data directory).",
                valueName: "address"))
        var email: String?

        @OptionGroup var data: DataOptions

        func run() throws {
            let token = TokenStore.generateToken()
            try exitingOnError {
                // Refused here, before the file is touched: every request of such a user would be.
                try UserID(user).validate()
                if let email { try UserIdentity.validate(emailAddress: email) }
                switch try data.location {
                case .lmdb(let directory):
                    if let email {
                        // The registry is the server's: owners find participants there by address.
                        let server = try SyncServer(SyncServer.Configuration(directory: directory))
                        try server.registerUser(UserID(user), emailAddress: email)
                        server.shutdown()
                    }
                    try TokenStore.append(token: token, user: UserID(user), to: data.tokensURL(in: directory))
                case .postgres:
                    let (server, tokens) = try data.server(
                        logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
                    defer { server.shutdown() }
                    if let email { try server.registerUser(UserID(user), emailAddress: email) }
                    try tokens.add(token: token, for: UserID(user))
                }
            }
            print(token)
        }
    }

    /// `logsync-server user revoke`: takes a user's tokens, or one token, away.
    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take away every token of USER, or one token (--token), on every running node within a second.",
            discussion: """
                Requests with a revoked token get 401, exactly as with a token never given, and \
                push channels opened with it close. The user's data stays: `user add` gives them \
                a new token.

                With an LMDB store the token file loses the token lines, replaced atomically; a \
                running server notices the change within a quarter of a second. With a PostgreSQL \
                store the rows are deleted and every node is told at once (NOTIFY). Prints how \
                many tokens were revoked; finding none is an error.

                    logsync-server user revoke alice --data ./data
                    logsync-server user revoke --token sha256:76dca26b… --data ./data
                """)

        @Argument(help: ArgumentHelp("The user whose every token is revoked.", valueName: "user"))
        var user: String?

        @Option(
            name: .long,
            help: ArgumentHelp(
                "One token to revoke instead: the token itself, or its digest as the token file shows it (sha256:<64 hex digits>).",
                valueName: "token"))
        var token: String?

        @OptionGroup var data: DataOptions

        func validate() throws {
            guard (user == nil) != (token == nil) else {
                throw ValidationError("name a user, or give --token, not both")
            }
        }

        /// What to revoke: every token of the user, or the one token's digest.
        func revocation() throws -> Revocation {
            if let user {
                try UserID(user).validate()
                return .user(UserID(user))
            }
            guard let digest = TokenStore.digest(ofTokenOrDigest: token ?? "") else {
                throw ValidationError(
                    "--token must be a token (16 to 512 printable ASCII characters) or its digest, sha256:<64 hex digits>"
                )
            }
            return .credential(digest)
        }

        func run() throws {
            let revocation = try revocation()
            let count = try exitingOnError { () -> Int in
                let count: Int
                switch try data.location {
                case .lmdb(let directory):
                    count = try TokenStore.revoke(revocation, inFile: data.tokensURL(in: directory))
                case .postgres:
                    let storage = try DataOptions.storage(
                        data.location, connections: 1,
                        logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
                    defer { storage.shutdown() }
                    count = try storage.tokens!.revoke(revocation)
                }
                guard count > 0 else {
                    switch revocation {
                    case .user(let user): throw SyncError(.unknownItem, "user \"\(user.rawValue)\" has no token")
                    case .credential, .session: throw SyncError(.unknownItem, "no such token")
                    }
                }
                return count
            }
            print(count == 1 ? "1 token revoked" : "\(count) tokens revoked")
        }
    }

    /// `logsync-server user rehash`: replaces tokens kept in the clear by their digests.
    struct Rehash: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace the tokens the token file holds in the clear by their SHA-256 digests.",
            discussion: """
                Token files written before tokens were hashed hold "<token> <user ID>" lines. They \
                still work, and the server warns about them when it reads the file; this command \
                rewrites them as "sha256:<digest> <user ID>" lines, keeping every other line. The \
                tokens stay valid, so devices and a running server need nothing. Prints how many \
                lines changed.
                """)

        @OptionGroup var data: DataOptions

        func run() throws {
            let count: Int? = try exitingOnError {
                guard case .lmdb(let directory) = try data.location else { return nil }
                return try TokenStore.rehash(file: data.tokensURL(in: directory))
            }
            guard let count else {
                print("0 tokens rehashed: a PostgreSQL store keeps only digests")
                return
            }
            print(count == 1 ? "1 token rehashed" : "\(count) tokens rehashed")
        }
    }
}
