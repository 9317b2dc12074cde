import ArgumentParser
import Foundation
import LogSyncHTTPServer
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server user`: the users, with the same operations as the admin routes
/// (`AdminOperations`; Docs/Protocol.md, "Admin API").
struct User: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the users who may connect.",
        subcommands: [Add.self, List.self, Revoke.self, Delete.self, Rehash.self, MoveUser.self])

    /// The admin operations on the store `data` names, and the server to shut down after.
    static func operations(_ data: DataOptions) throws -> (AdminOperations, SyncServer) {
        let (server, tokens) = try data.server(
            logger: Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() }))
        return (AdminOperations(server: server, tokens: tokens), server)
    }

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
                // Registered in the store, as the admin route does, so that `user list` shows them.
                let (operations, server) = try User.operations(data)
                defer { server.shutdown() }
                try operations.createUser(UserID(user), email: email)
                switch try data.location {
                case .lmdb(let directory):
                    try TokenStore.append(token: token, user: UserID(user), to: data.tokensURL(in: directory))
                case .postgres:
                    try operations.tokens.add(token: token, for: UserID(user))
                }
            }
            print(token)
        }
    }

    /// `logsync-server user list`: the registered users.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the registered users, in the order of their IDs' bytes.",
            discussion: """
                One line per user, tab-separated: the user ID, the e-mail address (or -), and how \
                many devices are signed in as sessions. The same list as GET /v1/admin/users, \
                read from the registry without reading anyone's records. A user is registered by \
                `user add`, the admin route, a sign-in or their first request.

                    logsync-server user list --data ./data
                    logsync-server user list --after alice --limit 10 --data ./data
                """)

        @Option(help: ArgumentHelp("List the users after this user ID only.", valueName: "user"))
        var after: String?

        @Option(help: ArgumentHelp("List at most this many users (1 to 1000); all without it.", valueName: "n"))
        var limit: Int?

        @OptionGroup var data: DataOptions

        func validate() throws {
            if let limit, !(1...AdminOperations.maxUsersPerPage).contains(limit) {
                throw ValidationError("--limit must be from 1 to \(AdminOperations.maxUsersPerPage), not \(limit)")
            }
        }

        func run() throws {
            let lines = try exitingOnError { () -> [String] in
                let (operations, server) = try User.operations(data)
                defer { server.shutdown() }
                var lines: [String] = []
                var cursor = after.map { UserID($0) }
                while true {
                    let want = limit.map { $0 - lines.count } ?? AdminOperations.maxUsersPerPage
                    let page = try operations.users(after: cursor, limit: min(want, AdminOperations.maxUsersPerPage))
                    lines += page.map { "\($0.user.rawValue)\t\($0.emailAddress ?? "-")\t\($0.sessions)" }
                    guard page.count == min(want, AdminOperations.maxUsersPerPage),
                        limit.map({ lines.count < $0 }) ?? true
                    else { break }
                    cursor = page.last?.user
                }
                return lines
            }
            for line in lines { print(line) }
        }
    }

    /// `logsync-server user delete USER`: the user and all their data.
    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete USER and all their data; the shares they own end for their participants.",
            discussion: """
                The same as DELETE /v1/admin/users/{user}: the user's sessions end and their \
                tokens are revoked; the shares they own are deleted (their participants see the \
                zones go, as when an owner deletes a share); they leave the shares of others; \
                their databases, asset contents and registration (with their e-mail address) \
                are deleted. Nothing of another user is touched. Deleting a user who is not \
                registered revokes any credential they have and is not an error; a deletion that \
                failed part way finishes when run again.

                With an LMDB store, run it against a stopped server or use the admin route: a \
                running server process does not forget the user's open databases. A PostgreSQL \
                store's nodes forget them when they hear the revocation.

                    logsync-server user delete alice --data ./data
                """)

        @Argument(help: ArgumentHelp("The user to delete.", valueName: "user"))
        var user: String

        @OptionGroup var data: DataOptions

        func run() throws {
            let existed = try exitingOnError { () -> Bool in
                try UserID(user).validate()
                let (operations, server) = try User.operations(data)
                defer { server.shutdown() }
                return try operations.deleteUser(UserID(user))
            }
            print(existed ? "user \"\(user)\" deleted" : "user \"\(user)\" was not registered; nothing to delete")
        }
    }

    /// `logsync-server user revoke`: takes a user's tokens, or one token, away.
    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Take away every token and session of USER, or one token (--token), on every running node within a second.",
            discussion: """
                Requests with a revoked token get 401, exactly as with a token never given, and \
                push channels opened with it close. Naming a user also ends every session of \
                theirs (their devices signed in with an identity token or given a session by the \
                admin API), as DELETE /v1/admin/users/{user}/sessions does. The user's data \
                stays: `user add` gives them a new token.

                With an LMDB store the token file loses the token lines, replaced atomically; a \
                running server notices the change within a quarter of a second. With a PostgreSQL \
                store the rows are deleted and every node is told at once (NOTIFY). Prints how \
                many tokens were revoked (and sessions ended, if any); finding none is an error.

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
            let (tokens, sessions) = try exitingOnError { () -> (Int, Int) in
                let (operations, server) = try User.operations(data)
                defer { server.shutdown() }
                switch revocation {
                case .user(let user):
                    // The same as DELETE /v1/admin/users/{user}/sessions: tokens and sessions.
                    let revoked = try operations.revokeCredentials(of: user)
                    guard revoked.tokens + revoked.sessions > 0 else {
                        throw SyncError(.unknownItem, "user \"\(user.rawValue)\" has no token or session")
                    }
                    return (revoked.tokens, revoked.sessions)
                case .credential, .session:
                    let count = try operations.tokens.revoke(revocation)
                    guard count > 0 else { throw SyncError(.unknownItem, "no such token") }
                    return (count, 0)
                }
            }
            var line = tokens == 1 ? "1 token revoked" : "\(tokens) tokens revoked"
            if sessions > 0 { line += sessions == 1 ? ", 1 session ended" : ", \(sessions) sessions ended" }
            print(line)
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
