import ArgumentParser
import Foundation

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
            Docs/Protocol.md describes the routes and the token file.
            """,
        subcommands: [Serve.self, User.self],
        defaultSubcommand: Serve.self)
}

/// The options every subcommand that touches the data directory shares.
struct DataOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The server's data directory: one LMDB environment per user, plus the token file. Created if missing.",
        valueName: "dir"))
    var data: String

    @Option(name: .long, help: ArgumentHelp(
        "The token file (\"sha256:<digest of the token> <user ID>\" per line). Default: <dir>/tokens.", valueName: "file"))
    var tokens: String?

    var dataURL: URL { URL(fileURLWithPath: data, isDirectory: true) }
    var tokensURL: URL { tokens.map { URL(fileURLWithPath: $0) } ?? dataURL.appendingPathComponent("tokens") }
}
