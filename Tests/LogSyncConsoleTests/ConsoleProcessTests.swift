import BrowserTestSupport
import ChildProcesses
import Foundation
import LogSyncDiagnostics
import LogSyncHTTP
import LogSyncServer
import LogSyncWire
import SyncModel
import TemporaryDirectory
import Testing

/// `logsync-server status`, `console-link` and the console of a `logsync-server` process with
/// two users who share, looked at in a headless Chromium.
@Suite("the console and status of a server process", .timeLimit(.minutes(5)))
struct ConsoleProcessTests {
    /// A served data directory: alice's notes shared with bob, the admin token in a file of its own.
    struct Served {
        var data: URL
        var adminToken: String
        /// A file holding the admin token itself, for `status` and `console-link`.
        var adminTokenFile: URL
        var process: ChildProcess
        var url: String
        var secrets: Secrets
    }

    static func withServed(_ body: (Served) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let data = directory.appendingPathComponent("data")
            let alice = try await ChildProcess.run(["user", "add", "alice", "--data", data.path])
            let bob = try await ChildProcess.run([
                "user", "add", "bob", "--email", "bob@example.com", "--data", data.path,
            ])
            #expect(alice.status == 0 && bob.status == 0, "\(alice) \(bob)")
            let aliceToken = alice.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let bobToken = bob.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let adminDigests = directory.appendingPathComponent("admin-tokens")
            let adminToken = try await ChildProcess.addAdminToken(to: adminDigests)
            let adminTokenFile = directory.appendingPathComponent("admin-token")
            try Data("# the backend's admin token\n\(adminToken)\n".utf8).write(to: adminTokenFile)

            let process = try ChildProcess.start([
                "--data", data.path, "--admin-token-file", adminDigests.path, "--port", "0",
            ])
            let port = try await process.waitForPort()
            let url = "http://127.0.0.1:\(port)"
            let aliceClient = HTTPSyncClient(
                .init(serverURL: URL(string: url)!, credentials: .token(aliceToken), device: "alice-phone"))
            let bobClient = HTTPSyncClient(
                .init(serverURL: URL(string: url)!, credentials: .token(bobToken), device: "bob-laptop"))
            defer {
                aliceClient.close()
                bobClient.close()
            }
            var secrets = try await populate(alice: aliceClient.database(), bobShared: bobClient.database(.shared))
            secrets.strings += [aliceToken, bobToken, adminToken]
            try await body(
                Served(
                    data: data, adminToken: adminToken, adminTokenFile: adminTokenFile, process: process, url: url,
                    secrets: secrets))
            _ = try? await process.terminate()
        }
    }

    @Test("status prints the admin route's overview, as a table and as JSON; it needs the admin token itself")
    func status() async throws {
        try await Self.withServed { served in
            let admin = AdminClient(serverURL: URL(string: served.url)!, adminToken: served.adminToken)
            let overview = try await admin.overview()
            let json = try await ChildProcess.run([
                "status", "--server", served.url, "--admin-token-file", served.adminTokenFile.path, "--json",
            ])
            #expect(json.status == 0, "\(json)")
            let printed = try WireSessions.decode(ServerOverview.self, from: Array(json.output.utf8))
            #expect(printed.users == overview.users)
            #expect(printed.totals == overview.totals)

            let table = try await ChildProcess.run([
                "status", "--server", served.url, "--admin-token-file", served.adminTokenFile.path,
            ])
            #expect(table.status == 0, "\(table)")
            let alicePrivate = try #require(overview.users.first { $0.user == "alice" }?.databases.first)
            let line = try #require(
                table.output.split(separator: "\n").first { $0.hasPrefix("alice") && $0.contains("private") },
                "\(table)")
            #expect(line.split(separator: " ").map(String.init)[2] == "\(alicePrivate.entries)", "\(line)")
            #expect(table.output.hasPrefix("users 2 "), "\(table)")
            for secret in served.secrets.strings {
                #expect(!json.output.contains(secret) && !table.output.contains(secret), "\(secret)")
            }

            let page = try await ChildProcess.run([
                "status", "--server", served.url, "--admin-token-file", served.adminTokenFile.path, "--limit", "1",
            ])
            #expect(page.output.contains("next page: --after alice"), "\(page)")

            // The server's file of digests is not a token; a wrong token is refused by the server.
            let digests = served.adminTokenFile.deletingLastPathComponent().appendingPathComponent("admin-tokens")
            let digest = try await ChildProcess.run([
                "status", "--server", served.url, "--admin-token-file", digests.path,
            ])
            #expect(digest.status != 0 && digest.errorOutput.contains("digest"), "\(digest)")
            let wrong = served.adminTokenFile.deletingLastPathComponent().appendingPathComponent("wrong")
            try Data("lsadm_not-the-admin-token-0123456789\n".utf8).write(to: wrong)
            let refused = try await ChildProcess.run([
                "status", "--server", served.url, "--admin-token-file", wrong.path,
            ])
            #expect(refused.status == 1 && refused.errorOutput.contains("notAuthenticated"), "\(refused)")
        }
    }

    @Test(
        "headless Chromium opens the console through a one-time link: its numbers are the store's, and the timeline page shows the user's lane",
        .enabled(if: Chromium.enabled, Comment(rawValue: Chromium.skipReason)))
    func browser() async throws {
        let chromium = try #require(
            Chromium.path, "LOGSYNC_BROWSER_TESTS=1 but no Chromium: apt-get install -y chromium")
        try await Self.withServed { served in
            let directory = served.data.deletingLastPathComponent()
            let browser = Chromium.headless(profileIn: directory)
            func link(_ next: String) async throws -> String {
                let made = try await ChildProcess.run([
                    "console-link", "--server", served.url, "--admin-token-file", served.adminTokenFile.path, "--next",
                    next,
                ])
                #expect(made.status == 0, "\(made)")
                let link = made.output.trimmingCharacters(in: .whitespacesAndNewlines)
                #expect(link.hasPrefix(served.url + "/console/enter/"), "\(made)")
                return link
            }

            // The overview, as the browser built its DOM.
            let dom = try await ChildProcess.run(
                browser + ["--dump-dom", try await link("/console")], program: chromium, directory: directory)
            #expect(dom.status == 0, "\(dom)")
            let html = dom.output
            #expect(html.contains("id=\"users\""), "not the overview: \(html.prefix(600))")
            #expect(served.secrets.found(in: html).isEmpty, "\(served.secrets.found(in: html))")
            func figure(_ name: String, of user: String) throws -> UInt64 {
                let text = try #require(attribute(name, after: "data-user=\"\(user)\"", in: html), "\(name) of \(user)")
                return try #require(UInt64(text), "\(name) of \(user): \(text)")
            }
            let figures = (
                alicePrivate: try figure("data-private-entries", of: "alice"),
                aliceShared: try figure("data-shared-entries", of: "alice"),
                bobShared: try figure("data-shared-entries", of: "bob"),
                aliceZones: try figure("data-zones", of: "alice"), bobZones: try figure("data-zones", of: "bob"),
                aliceShares: try figure("data-shares", of: "alice")
            )
            #expect(attribute("data-value", after: "id=\"total-users\"", in: html) == "2")
            #expect(attribute("data-value", after: "id=\"total-shares\"", in: html) == "1")

            // A user's page, and the timeline picture of their log.
            let userDOM = try await ChildProcess.run(
                browser + ["--dump-dom", try await link("/console/users/bob")], program: chromium,
                directory: directory)
            #expect(userDOM.output.contains("data-scope=\"shared\""), "\(userDOM.output.prefix(600))")
            let png = directory.appendingPathComponent("timeline.png")
            let shot = try await ChildProcess.run(
                browser + [
                    "--screenshot=\(png.path)", "--window-size=900,700",
                    try await link("/console/users/alice/timeline"),
                ], program: chromium, directory: directory)
            #expect(shot.status == 0, "\(shot)")
            let image = try PNGImage(try Data(contentsOf: png))
            let rows = image.rows(mostly: Timeline.Picture.serverFill, share: 0.3)
            let band = try #require(rows.first.map { $0...rows.last! }, "no lane of the server log in the screenshot")
            #expect(
                band.count >= Timeline.Picture.laneHeight - 2 && band.count <= Timeline.Picture.laneHeight + 2,
                "rows \(band)")
            #expect(rows.count >= Timeline.Picture.laneHeight / 2, "only \(rows.count) rows mostly of the lane")

            // The store, once the server has stopped, holds what the browser read.
            #expect(try await served.process.terminate().status == 0)
            let server = try SyncServer(.init(directory: served.data))
            defer { server.shutdown() }
            #expect(figures.alicePrivate == (try server.admin.log(of: "alice").lastOffset.rawValue))
            #expect(figures.aliceShared == (try server.admin.log(of: "alice", scope: .shared).lastOffset.rawValue))
            #expect(figures.bobShared == (try server.admin.log(of: "bob", scope: .shared).lastOffset.rawValue))
            #expect(figures.bobShared > 0 && figures.alicePrivate > figures.bobShared)
            let alice = try #require(try server.databaseSummary(of: "alice", scope: .private))
            let bobShared = try #require(try server.databaseSummary(of: "bob", scope: .shared))
            #expect(figures.aliceZones == UInt64(alice.zones) && figures.aliceZones == 1)
            #expect(figures.bobZones == UInt64(bobShared.zones) && figures.bobZones == 1)
            #expect(figures.aliceShares == UInt64(alice.shares) && figures.aliceShares == 1)
        }
    }
}
