import CoreMetrics
import Foundation
import LogStore
import LogSyncConsole
import LogSyncDiagnostics
import LogSyncHTTP
import LogSyncHTTPServer
import LogSyncWire
import SyncModel
import Testing

@testable import LogSyncServer

/// The operations console over HTTP: the admin credential or a one-time link's session opens
/// it, nothing else; its pages are paginated, escape what they show, and never show a token, a
/// share's secret or a sealed value.
@Suite("the operations console", .timeLimit(.minutes(5)))
struct ConsoleTests {
    /// The console paths a refusal is checked on: pages of users that exist and do not, and
    /// paths that are no page.
    static let paths = [
        "/console", "/console/users/alice", "/console/users/nobody", "/console/users/alice/records?zone=Notes",
        "/console/users/alice/records/Notes/n0", "/console/users/alice/timeline", "/console/users/nobody/timeline",
        "/console/no-such-page", "/console/users/alice/nothing/here",
    ]

    @Test(
        "without the admin token or a console session every console path answers the same 401, whether or not what it names exists, and writes nothing"
    )
    func refusals() async throws {
        try await ConsoleServer.with { served in
            _ = try await populate(served.server)
            let before = try served.server.users.log.lastOffset
            var bodies: Set<String> = []
            let bobSession = try AdminOperations(server: served.server, tokens: served.tokens)
                .mintSession(for: "bob", device: "laptop")
            for path in Self.paths {
                for (token, cookie) in [
                    (nil, nil), ("lsadm_not-the-admin-token-0123456789", nil), (ConsoleServer.aliceToken, nil),
                    (bobSession.accessToken, nil), (nil, "\(Console.cookieName)=forged-session-value"),
                    (nil, "\(Console.cookieName)=\(ConsoleServer.adminToken)"),
                ] as [(String?, String?)] {
                    let answer = try await served.request(path, token: token, cookie: cookie)
                    #expect(answer.status == 401, "\(path) \(token ?? cookie ?? "nothing"): \(answer)")
                    bodies.insert(answer.body)
                }
            }
            #expect(bodies.count == 1, "\(bodies)")
            #expect(try served.server.users.log.lastOffset == before)
            #expect(try served.server.isRegistered("nobody") == false)
            // A console link asks for the admin token itself.
            let link = try await served.request(
                WireConsole.linksPath, method: .POST, token: ConsoleServer.aliceToken, body: Array("{}".utf8))
            #expect(link.status == 401, "\(link)")
        }
    }

    @Test(
        "a console link opens a session once, within 60 seconds, as an HttpOnly SameSite=Strict cookie, and leads only to a console page"
    )
    func oneTimeLinks() async throws {
        try await ConsoleServer.with { served in
            try served.server.registerUser("alice")
            let admin = AdminClient(serverURL: URL(string: served.url)!, adminToken: ConsoleServer.adminToken)
            let link = try await admin.consoleLink(next: "/console/users/alice")
            #expect(link.expiresIn == 60)
            #expect(link.path.hasPrefix("/console/enter/"), "\(link)")
            let entered = try await served.request(link.path)
            #expect(entered.status == 303, "\(entered)")
            #expect(entered.headers["Location"] == ["/console/users/alice"])
            let cookie = try #require(entered.headers["Set-Cookie"].first)
            for part in ["HttpOnly", "SameSite=Strict", "Path=/console"] { #expect(cookie.contains(part), "\(cookie)") }
            #expect(!cookie.contains("Secure"), "plain HTTP: \(cookie)")
            let session = String(try #require(cookie.split(separator: ";").first))
            #expect(try await served.request("/console", cookie: session).status == 200)
            #expect(try await served.request("/console/users/alice", cookie: session).status == 200)

            // Once only.
            #expect(try await served.request(link.path).status == 401)
            // Not after 60 seconds.
            let late = try await admin.consoleLink()
            served.clock.advance(seconds: 61)
            #expect(try await served.request(late.path).status == 401)
            // The session lasts hours, not forever.
            #expect(try await served.request("/console", cookie: session).status == 200)
            served.clock.advance(seconds: 9 * 3600)
            #expect(try await served.request("/console", cookie: session).status == 401)

            // Only to the console.
            for next in [
                "https://evil.example/console", "//evil.example/console", "/v1/admin/users", "/consoles",
                "/console/../v1",
            ] {
                do {
                    _ = try await admin.consoleLink(next: next)
                    Issue.record("\(next) was accepted")
                } catch let error as SyncError {
                    #expect(error.code == .invalidArguments, "\(next): \(error)")
                }
            }
            // A `next` changed in the link itself leads to the console's first page.
            let changed = try await admin.consoleLink()
            let code = try #require(changed.path.split(separator: "?").first)
            let redirected = try await served.request(code + "?next=https%3A%2F%2Fevil.example%2F")
            #expect(redirected.headers["Location"] == ["/console"], "\(redirected)")
        }
    }

    @Test(
        "no page shows a token, a share's secret or a sealed value: a sealed field shows as sealed and its size; values are escaped"
    )
    func nothingSecretShown() async throws {
        try await ConsoleServer.with { served in
            var secrets = try await populate(served.server)
            let operations = AdminOperations(server: served.server, tokens: served.tokens)
            let session = try operations.mintSession(for: "alice", device: "phone")
            try served.server.registerUser("<b>eve&\"'")
            secrets.strings += [
                ConsoleServer.adminToken, ConsoleServer.aliceToken, ConsoleServer.bobToken, session.accessToken,
                session.refreshToken, "<b>eve",
            ]
            // Every page the console links to, from its first, with the admin token.
            var seen: Set<String> = []
            var queue = ["/console"]
            var pages: [String: String] = [:]
            while let path = queue.first, seen.count < 60 {
                queue.removeFirst()
                guard seen.insert(path).inserted else { continue }
                let answer = try await served.request(path, token: ConsoleServer.adminToken)
                #expect(answer.status == 200, "\(path): \(answer)")
                #expect(secrets.found(in: answer.body).isEmpty, "\(path) shows \(secrets.found(in: answer.body))")
                pages[path] = answer.body
                queue += consoleLinks(in: answer.body).filter { !seen.contains($0) }
            }
            let visited = pages.keys.sorted()
            for wanted in [
                "/console/users/alice", "/console/users/bob", "/console/users/alice/timeline",
                "/console/users/bob/timeline?scope=shared", "/console/users/alice/timeline?scope=private&record=n0",
            ] {
                #expect(visited.contains(wanted), "\(visited)")
            }
            #expect(visited.contains { $0.hasPrefix("/console/users/alice/records/Notes/n0") }, "\(visited)")
            #expect(visited.contains { $0.hasPrefix("/console/users/bob/records?scope=shared") }, "\(visited)")
            let history = try #require(pages.first { $0.key.hasPrefix("/console/users/alice/records/Notes/n0") }?.value)
            #expect(history.contains("secret: sealed, 39 bytes"), "\(history)")
            let recordTimeline = try #require(pages["/console/users/alice/timeline?scope=private&record=n0"])
            #expect(recordTimeline.contains("class=\"lane\""), "\(recordTimeline.prefix(2000))")
            let alicePage = try #require(pages["/console/users/alice"])
            #expect(alicePage.contains("id=\"shares\" data-count=\"1\""), "\(alicePage)")
            #expect(attribute("data-accepted", after: "data-share=", in: alicePage) == "1")
            let overview = try #require(pages["/console"])
            #expect(overview.contains("&lt;b&gt;eve&amp;&quot;&#39;"), "\(overview)")
        }
    }

    @Test("the overview's figures are the store's: entries, zones, shares, sessions; and the same over the admin route")
    func overviewFigures() async throws {
        try await ConsoleServer.with { served in
            _ = try await populate(served.server)
            _ = try AdminOperations(server: served.server, tokens: served.tokens).mintSession(
                for: "bob", device: "laptop")
            let admin = AdminClient(serverURL: URL(string: served.url)!, adminToken: ConsoleServer.adminToken)
            let overview = try await admin.overview()
            #expect(overview.users.map(\.user) == ["alice", "bob"])
            #expect(overview.next == nil)
            let alice = try #require(overview.users.first)
            let bob = try #require(overview.users.last)
            let alicePrivate = try #require(alice.databases.first { $0.scope == "private" })
            #expect(alicePrivate.entries == (try served.server.admin.log(of: "alice").lastOffset.rawValue))
            #expect(alicePrivate.zones == 1)
            #expect(alicePrivate.shares == 1)
            #expect(alicePrivate.lastCommit != nil)
            #expect(alicePrivate.storeBytes ?? 0 > 0)
            let bobShared = try #require(bob.databases.first { $0.scope == "shared" })
            #expect(bobShared.zones == 1)
            #expect(bobShared.entries == (try served.server.admin.log(of: "bob", scope: .shared).lastOffset.rawValue))
            #expect(bob.sessionDevices == ["laptop"])
            #expect(overview.totals.users == 2 && overview.totals.sessions == 1 && overview.totals.shares == 1)

            let page = try await admin.overview(limit: 1)
            #expect(page.users.map(\.user) == ["alice"] && page.next == "alice")
            #expect(try await admin.overview(after: "alice", limit: 1).users.map(\.user) == ["bob"])
            do {
                _ = try await admin.overview(limit: 0)
                Issue.record("limit 0 accepted")
            } catch let error as SyncError {
                #expect(error.code == .invalidArguments)
            }
            let refused = try await served.request(ServerOverview.path, token: ConsoleServer.aliceToken)
            #expect(refused.status == 401)

            // The console's overview page carries the same figures.
            let html = try await served.request("/console", token: ConsoleServer.adminToken).body
            #expect(
                attribute("data-private-entries", after: "data-user=\"alice\"", in: html) == "\(alicePrivate.entries)")
            #expect(attribute("data-shared-entries", after: "data-user=\"bob\"", in: html) == "\(bobShared.entries)")
            #expect(attribute("data-shares", after: "data-user=\"alice\"", in: html) == "1")
            #expect(attribute("data-value", after: "id=\"total-users\"", in: html) == "2")
        }
    }

    @Test("a user with 20,000 records: a page of records holds 50 and a link to the next, which goes on after the last")
    func boundedRecordPages() async throws {
        try await ConsoleServer.with { served in
            let alice = served.server.database(for: "alice", device: "phone")
            let zone = RecordZone.ID(zoneName: "Many")
            _ = try await alice.modifyZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            for batch in 0..<50 {
                let records = (0..<400).map { index in
                    var record = Record(
                        recordType: "Item",
                        recordID: Record.ID(recordName: String(format: "r%05d", batch * 400 + index), zoneID: zone))
                    record["n"] = .int64(Int64(index))
                    return record
                }
                _ = try await alice.modifyRecords(saving: records, deleting: [])
            }
            let first = try await served.request(
                "/console/users/alice/records?zone=Many", token: ConsoleServer.adminToken)
            #expect(first.status == 200)
            #expect(first.body.contains("id=\"records\" data-count=\"50\""), "\(first)")
            #expect(first.body.contains("data-record=\"r00049\"") && !first.body.contains("data-record=\"r00050\""))
            let next = try #require(consoleLinks(in: first.body).first { $0.contains("after=r00049") }, "\(first)")
            #expect(first.body.contains("id=\"next\""))
            let second = try await served.request(next, token: ConsoleServer.adminToken)
            #expect(second.body.contains("data-count=\"50\"") && second.body.contains("data-record=\"r00050\""))
            #expect(!second.body.contains("data-record=\"r00049\""))
            let last = try await served.request(
                "/console/users/alice/records?zone=Many&after=r19990", token: ConsoleServer.adminToken)
            #expect(last.body.contains("data-count=\"9\"") && !last.body.contains("id=\"next\""), "\(last)")
            let bad = try await served.request(
                "/console/users/alice/records?zone=Many&limit=100000", token: ConsoleServer.adminToken)
            #expect(bad.status == 400, "\(bad)")
            // The overview and the user's page do not read the records either.
            #expect(try await served.request("/console/users/alice", token: ConsoleServer.adminToken).status == 200)
        }
    }

    @Test(
        "recent errors by code and the charts come from the metrics history: what the server's requests and commits recorded"
    )
    func errorsAndCharts() async throws {
        try await ConsoleServer.with { served in
            let history = served.history
            func requests(_ code: String, status: String, _ count: Int64) {
                history.makeCounter(
                    label: "logsync_http_requests_total",
                    dimensions: [("route", "modifyRecords"), ("status", status), ("code", code)]
                ).increment(by: count)
            }
            requests("ok", status: "200", 40)
            requests("notAuthenticated", status: "401", 3)
            requests("zoneNotFound", status: "200", 2)
            history.makeCounter(label: "logsync_records_saved_total", dimensions: []).increment(by: 120)
            history.makeTimer(label: "logsync_commit_duration_seconds", dimensions: [("store", "lmdb")])
                .recordNanoseconds(5_000_000)
            let html = try await served.request("/console", token: ConsoleServer.adminToken).body
            #expect(attribute("data-count", after: "data-code=\"notAuthenticated\"", in: html) == "3", "\(html)")
            #expect(attribute("data-count", after: "data-code=\"zoneNotFound\"", in: html) == "2")
            #expect(!html.contains("data-code=\"ok\""))
            #expect(attribute("data-total", after: "id=\"chart-requests\"", in: html) == "45")
            #expect(attribute("data-total", after: "id=\"chart-saved\"", in: html) == "120")
            #expect(attribute("data-max", after: "id=\"chart-commit\"", in: html) == "0.005")
            #expect(html.contains("<polyline"))
        }
    }

    @Test("the timeline of a long log's last entries reads only those entries")
    func boundedTimeline() async throws {
        try await ConsoleServer.with { served in
            let alice = served.server.database(for: "alice", device: "phone")
            for index in 0..<300 {
                var record = Record(recordType: "Item", recordID: Record.ID(recordName: "r\(index)"))
                record["n"] = .int64(Int64(index))
                _ = try await alice.modifyRecords(saving: [record], deleting: [])
            }
            let log = try served.server.admin.log(of: "alice")
            let last = try log.lastOffset
            #expect(last.rawValue >= 300)
            var read = 0
            let timeline = try Timeline.build(
                devices: [], server: Timeline.Source(name: "private", log: log),
                options: Timeline.Options(serverOffsets: LogOffset(last.rawValue - 49)...last)
            ) { _ in read += 1 }
            #expect(read == 50)
            #expect(timeline.steps.count == 50)
            let page = try await served.request(
                "/console/users/alice/timeline?entries=50", token: ConsoleServer.adminToken)
            #expect(attribute("data-first", after: "id=\"timeline\"", in: page.body) == "\(last.rawValue - 49)")
            #expect(page.body.contains("the last 100 entries"), "\(page.body.suffix(600))")
        }
    }
}
