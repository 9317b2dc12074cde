import ArgumentParser
import Foundation
import LogSyncHTTPServer

/// `logsync-server admin-token`: the admin tokens of the app's backend.
struct AdminToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin-token",
        abstract: "Manage the admin tokens that open the admin routes (Docs/Protocol.md, \"Admin API\").",
        subcommands: [Add.self])

    /// `logsync-server admin-token add --file PATH`: a new admin token.
    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new admin token, append its digest to the admin token file and print it.",
            discussion: """
                The token is printed alone on standard output, for scripts:

                    ADMIN=$(logsync-server admin-token add --file ./admin-tokens)
                    logsync-server --data ./data --admin-token-file ./admin-tokens

                The file keeps only the token's SHA-256 digest and is created readable by its \
                owner only. An admin token is the backend's, never a user's: it opens the admin \
                routes and no database route. A running server reads the file when it starts.
                """)

        @Option(name: .long, help: ArgumentHelp("The admin token file, created if missing.", valueName: "path"))
        var file: String

        func run() throws {
            let token = AdminCredential.generateToken()
            try exitingOnError { try AdminCredential.append(token: token, to: URL(fileURLWithPath: file)) }
            print(token)
        }
    }
}
