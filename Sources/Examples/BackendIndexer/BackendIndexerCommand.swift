import ArgumentParser
import Foundation
import LogSyncHTTP
import SyncModel

/// `backend-indexer`: an app's backend following every database of every user through the
/// admin change stream (Docs/Protocol.md, "Admin change stream"), keeping an index of every
/// record in a directory. It never holds a user's token: only an admin token.
///
/// ```
/// backend-indexer --server http://127.0.0.1:8080 --admin-token "$ADMIN" --state ./index
/// ```
///
/// The directory holds `index.json` (every record: user, scope, zone, record name, type and
/// fields) and `tokens.json` (the change tokens of each database and zone read so far). After
/// each database is read, the index is written first, then the tokens, each to a temporary file
/// renamed over the old one: killed at any moment, the indexer resumes from tokens no newer than
/// its index, reads some changes again, and applies them again to the same result. (It rewrites
/// the whole index after each database it reads: an example's simplicity; a real backend keeps
/// its index and tokens in one database and commits them together.)
@main
struct BackendIndexerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backend-indexer",
        abstract: "Index every record of every user of a logsync-server through its admin change stream.")

    @Option(help: ArgumentHelp("The server's URL.", valueName: "url"))
    var server: String

    @Option(
        help: ArgumentHelp(
            "An admin token (logsync-server admin-token add); or set LOGSYNC_ADMIN_TOKEN.", valueName: "token"))
    var adminToken: String?

    @Option(help: ArgumentHelp("The directory of index.json and tokens.json, created if missing.", valueName: "path"))
    var state: String

    @Flag(help: "Exit once every database that held anything when the stream began is indexed.")
    var untilIdle = false

    func run() async throws {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https" else {
            throw ValidationError("--server: \"\(server)\" is not an http or https URL")
        }
        guard let token = adminToken ?? ProcessInfo.processInfo.environment["LOGSYNC_ADMIN_TOKEN"] else {
            throw ValidationError("an admin token is needed: --admin-token or LOGSYNC_ADMIN_TOKEN")
        }
        let admin = AdminClient(serverURL: url, adminToken: token)
        let index = try Index(directory: URL(fileURLWithPath: state, isDirectory: true))
        var failures = 0
        while true {
            do {
                var live = false
                for try await event in admin.changeHints() {
                    failures = 0
                    switch event {
                    case .changed(let hint):
                        guard index.token(of: hint.user, hint.scope) != hint.token.data else { continue }
                        let counts = try await index.read(hint.user, hint.scope, from: admin)
                        say(
                            "indexed \(hint.user) \(hint.scope)\(live ? " (live)" : ""): \(counts.saved) saved, \(counts.deleted) deleted"
                        )
                    case .caughtUp:
                        live = true
                        say("caught up: \(index.recordCount) records")
                        if untilIdle { return }
                    }
                }
                say("the server ended the stream; reconnecting")
            } catch let error as SyncError where error.code == .notAuthenticated {
                throw error
            } catch {
                failures += 1
                say("stream failed (\(error)); reconnecting")
                if untilIdle && failures > 30 { throw error }
                try await Task.sleep(for: .milliseconds(min(5_000, 100 << min(failures, 6))))
            }
        }
    }

    func say(_ text: String) {
        FileHandle.standardOutput.write(Data("backend-indexer: \(text)\n".utf8))
    }
}
