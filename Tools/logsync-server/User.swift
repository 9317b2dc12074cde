import ArgumentParser
import Foundation
import Logging
import LogSyncHTTPServer
import LogSyncServer
import SyncModel

/// `logsync-server user`: the users of the token file.
struct User: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the users who may connect.",
        subcommands: [Add.self, Rehash.self])

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

        @Argument(help: ArgumentHelp(
            "The user ID, such as an e-mail address: 1 to 511 bytes of UTF-8 without control characters or surrounding spaces.",
            valueName: "user"))
        var user: String

        @Option(name: .long, help: ArgumentHelp(
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
                    let (server, tokens) = try data.server(logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
                    defer { server.shutdown() }
                    if let email { try server.registerUser(UserID(user), emailAddress: email) }
                    try tokens.add(token: token, for: UserID(user))
                }
            }
            print(token)
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
