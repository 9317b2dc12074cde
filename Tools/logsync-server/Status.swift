import ArgumentParser
import Foundation
import LogSyncHTTP
import LogSyncWire
import SyncModel

/// How `status` and `console-link` reach a running server's admin routes.
struct AdminConnection: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("The running server's base URL, such as http://127.0.0.1:8080.", valueName: "url"))
    var server: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A file holding the admin token itself (as `logsync-server admin-token add` printed it), on its first line that is not blank or a # comment. Default: the LOGSYNC_ADMIN_TOKEN environment variable.",
            valueName: "path"))
    var adminTokenFile: String?

    func validate() throws {
        guard let url = URL(string: server), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil
        else { throw ValidationError("--server must be an http or https URL, not \"\(server)\"") }
        _ = try token()
    }

    /// The admin token of --admin-token-file or LOGSYNC_ADMIN_TOKEN.
    func token() throws -> String {
        if let adminTokenFile {
            let text: String
            do {
                text = try String(contentsOfFile: adminTokenFile, encoding: .utf8)
            } catch {
                throw ValidationError(
                    "--admin-token-file \(adminTokenFile): cannot be read (\(error.localizedDescription))")
            }
            let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            guard let token = lines.first(where: { !$0.isEmpty && !$0.hasPrefix("#") }) else {
                throw ValidationError("--admin-token-file \(adminTokenFile): holds no token")
            }
            guard !token.hasPrefix("sha256:") else {
                throw ValidationError(
                    "--admin-token-file \(adminTokenFile): holds a token's digest (the server's file), not the token")
            }
            return token
        }
        if let token = ProcessInfo.processInfo.environment["LOGSYNC_ADMIN_TOKEN"], !token.isEmpty { return token }
        throw ValidationError("give --admin-token-file or set LOGSYNC_ADMIN_TOKEN")
    }

    func client() throws -> AdminClient {
        AdminClient(serverURL: URL(string: server)!, adminToken: try token(), requestTimeout: .seconds(30))
    }
}

/// `logsync-server status`: the running server's overview, as a table or JSON.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a running server's users, databases and devices (GET /v1/admin/overview).",
        discussion: """
            Asks the server with the admin token and prints a page of users: each database's \
            log length (entries), last commit, store size, zones, shares, assets and quota use, \
            the devices signed in and connected, and the page's totals. With --json, the \
            overview as the server answers it, for scripts. Docs/Deployment.md, "Status".
            """)

    @OptionGroup var connection: AdminConnection

    @Option(name: .long, help: ArgumentHelp("Start after this user ID (the previous page's next).", valueName: "user"))
    var after: String?

    @Option(name: .long, help: ArgumentHelp("How many users (1 to 200).", valueName: "n"))
    var limit = ServerOverview.defaultUsersPerPage

    @Flag(name: .long, help: "Print the overview as JSON.")
    var json = false

    func validate() throws {
        guard (1...ServerOverview.maxUsersPerPage).contains(limit) else {
            throw ValidationError("--limit must be from 1 to \(ServerOverview.maxUsersPerPage)")
        }
    }

    func run() async throws {
        let overview: ServerOverview
        do {
            overview = try await connection.client().overview(after: after, limit: limit)
        } catch let error as SyncError {
            FileHandle.standardError.write(Data("logsync-server status: \(error.code): \(error.message)\n".utf8))
            throw ExitCode.failure
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            print(String(decoding: try encoder.encode(overview), as: UTF8.self))
        } else {
            print(Self.table(overview), terminator: "")
        }
    }

    /// The overview as text: totals, then one line per database.
    static func table(_ overview: ServerOverview) -> String {
        let totals = overview.totals
        var text = """
            users \(totals.users)   entries \(totals.entries)   store \(totals.storeBytes) B   zones \(totals.zones)   \
            shares \(totals.shares)   assets \(totals.assets) (\(totals.assetBytes) B)   sessions \(totals.sessions)   \
            push channels \(totals.pushChannels)

            """
        var rows: [[String]] = [
            [
                "USER", "SCOPE", "ENTRIES", "LAST COMMIT", "STORE B", "ZONES", "SHARES", "ASSETS", "USAGE B", "QUOTA B",
                "SESSIONS", "CHANNELS",
            ]
        ]
        let dates = ISO8601DateFormatter()
        for user in overview.users {
            for database in user.databases {
                rows.append([
                    user.user, database.scope, "\(database.entries)",
                    database.lastCommit.map(dates.string(from:)) ?? "-",
                    database.storeBytes.map(String.init) ?? "-", "\(database.zones)", "\(database.shares)",
                    "\(database.assets)\(database.assetsCapped ? "+" : "")", "\(database.usage)",
                    user.quota.map(String.init) ?? "-", "\(user.sessionDevices.count)",
                    "\(user.channels.filter { $0.scope == database.scope }.count)",
                ])
            }
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            text +=
                zip(row, widths).map { cell, width in cell.padding(toLength: width, withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }
        if let next = overview.next { text += "next page: --after \(next)\n" }
        return text
    }
}

/// `logsync-server console-link`: a one-time link into a running server's console.
struct ConsoleLink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console-link",
        abstract: "Print a one-time link into a running server's console, for a browser (valid 60 seconds).",
        discussion: """
            The link opens a console session in the browser that follows it (an HttpOnly \
            cookie), once, within a minute. Docs/Deployment.md, "Console".
            """)

    @OptionGroup var connection: AdminConnection

    @Option(name: .long, help: ArgumentHelp("The console page to open, a path under /console.", valueName: "path"))
    var next: String?

    func run() async throws {
        do {
            let link = try await connection.client().consoleLink(next: next)
            var base = connection.server
            while base.hasSuffix("/") { base.removeLast() }
            print(base + link.path)
        } catch let error as SyncError {
            FileHandle.standardError.write(Data("logsync-server console-link: \(error.code): \(error.message)\n".utf8))
            throw ExitCode.failure
        }
    }
}
