import Foundation
import Hummingbird
import LogStore
import LogSyncDiagnostics
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import SyncModel

/// The console's pages (see ``Console``). Every figure a test reads stands in a `data-`
/// attribute or an `id`.
extension Console {
    /// Records per page of `/console/users/{user}/records`, and the most one may ask for.
    public static let recordsPerPage = 50
    public static let maxRecordsPerPage = 500
    /// Entries drawn by `/console/users/{user}/timeline`, and the most one may ask for.
    public static let timelineEntries = 200
    public static let maxTimelineEntries = 1_000
    /// How far back a record's history is looked for: the log's last entries.
    public static let historyWindow = 5_000

    var operations: AdminOperations { AdminOperations(server: http.server, tokens: http.tokens) }

    // MARK: Overview

    func overviewPage(_ request: Request) async throws -> String {
        let query = request.uri.queryParameters
        let after = try query["after"].map { text in try checked(UserID(rawValue: String(text))) }
        let limit = try number(
            query["limit"], default: ServerOverview.defaultUsersPerPage, max: ServerOverview.maxUsersPerPage)
        let operations = self.operations
        let overview = try await run { try operations.overview(after: after, limit: limit) }
        var body = ""
        let totals = overview.totals
        body += "<h2>Totals</h2><dl id=\"totals\">"
        for (id, label, value) in [
            ("users", "users on this page", "\(totals.users)"), ("entries", "log entries", "\(totals.entries)"),
            ("store-bytes", "store size", "\(totals.storeBytes)"), ("zones", "zones", "\(totals.zones)"),
            ("shares", "shares", "\(totals.shares)"), ("assets", "asset contents", "\(totals.assets)"),
            ("sessions", "signed-in devices", "\(totals.sessions)"),
            ("push-channels", "push channels open (this node)", "\(totals.pushChannels)"),
        ] {
            let shown = id == "store-bytes" ? HTML.bytes(totals.storeBytes) : value
            body +=
                "<dt>\(HTML.escape(label))</dt><dd id=\"total-\(id)\" data-value=\"\(HTML.escape(value))\">\(HTML.escape(shown))</dd>"
        }
        body += "</dl>"
        body += "<h2>Users</h2>"
        let rows = overview.users.map { user -> String in
            let databases = Dictionary(user.databases.map { ($0.scope, $0) }, uniquingKeysWith: { a, _ in a })
            let privateDB = databases["private"]
            let sharedDB = databases["shared"]
            let zones = user.databases.reduce(0) { $0 + $1.zones }
            let shares = user.databases.reduce(0) { $0 + $1.shares }
            let assets = user.databases.reduce(0) { $0 + $1.assets }
            let last = user.databases.compactMap(\.lastCommit).max()
            return """
                <tr data-user="\(HTML.escape(user.user))">\
                <td><a href="\(HTML.href("/console/users/" + HTML.component(user.user)))">\(HTML.escape(user.user))</a></td>\
                \(HTML.number(privateDB?.entries ?? 0, name: "private-entries"))\
                \(HTML.number(sharedDB?.entries ?? 0, name: "shared-entries"))\
                <td class="n" data-store-bytes="\(privateDB?.storeBytes ?? 0)">\(HTML.bytes(privateDB?.storeBytes ?? 0))</td>\
                <td>\(HTML.date(last))</td>\
                \(HTML.number(zones, name: "zones"))\(HTML.number(shares, name: "shares"))\
                \(HTML.number(assets, name: "assets"))\
                <td class="n" data-usage="\(privateDB?.usage ?? 0)">\(HTML.bytes(privateDB?.usage ?? 0))\(user.quota.map { " of " + HTML.bytes(UInt64(max($0, 0))) } ?? "")</td>\
                \(HTML.number(user.sessionDevices.count, name: "sessions"))\(HTML.number(user.channels.count, name: "channels"))</tr>
                """
        }
        body += HTML.table(
            [
                "user", "#private entries", "#shared entries", "#store", "last commit", "#zones", "#shares", "#assets",
                "#usage", "#sessions", "#push channels",
            ], rows: rows, attributes: " id=\"users\"")
        body += "<p class=\"pager\">"
        if after != nil { body += "<a href=\"/console\">first page</a>" }
        if let next = overview.next {
            body +=
                "<a id=\"next\" href=\"\(HTML.href("/console", [("after", next), ("limit", "\(limit)")]))\">next page</a>"
        }
        body += "</p>"
        body += errorsAndCharts()
        return HTML.page(title: "Overview", body: body)
    }

    /// Recent errors by code and the small charts, from ``history``.
    func errorsAndCharts() -> String {
        guard let history else { return "<p class=\"muted\">No metrics history on this server.</p>" }
        var body = "<h2>Recent errors (last hour)</h2>"
        let errors = history.totals("logsync_http_requests_total", by: "code").filter { $0.key != "ok" && $0.value > 0 }
        if errors.isEmpty {
            body += "<p id=\"errors\" data-count=\"0\">None.</p>"
        } else {
            let rows = errors.sorted { $0.value > $1.value }.map { code, count in
                "<tr data-code=\"\(HTML.escape(code))\"><td>\(HTML.escape(code))</td><td class=\"n\" data-count=\"\(Sparkline.format(count))\">\(Sparkline.format(count))</td></tr>"
            }
            body += HTML.table(["code", "#requests"], rows: rows, attributes: " id=\"errors\"")
        }
        body += "<h2>Last hour</h2><div class=\"charts\">"
        body += Sparkline.svg(
            title: "requests per minute", values: history.perMinute("logsync_http_requests_total", .sum),
            id: "chart-requests")
        body += Sparkline.svg(
            title: "commit time, mean", values: history.perMinute("logsync_commit_duration_seconds", .mean), unit: " s",
            id: "chart-commit")
        body += Sparkline.svg(
            title: "records saved per minute", values: history.perMinute("logsync_records_saved_total", .sum),
            id: "chart-saved")
        body += "</div>"
        return body
    }

    // MARK: One user

    func userPage(_ user: UserID) async throws -> String {
        let server = http.server
        let tokens = http.tokens
        struct Figures: Sendable {
            var databases: [DatabaseSummary]
            var zones: [DatabaseScope: [RecordZone.ID]]
            var devices: [SessionStore.Session]
            var email: String?
            var shares: [ShareSummary]
        }
        let figures = try await run { () throws -> Figures? in
            guard let registered = try server.registeredUser(user) else { return nil }
            var databases: [DatabaseSummary] = []
            var zones: [DatabaseScope: [RecordZone.ID]] = [:]
            for scope in [DatabaseScope.private, .shared] {
                if let summary = try server.databaseSummary(of: user, scope: scope) { databases.append(summary) }
                zones[scope] = try server.zones(of: user, scope: scope, limit: 200)
            }
            let devices = try tokens.sessions?.sessions(of: user) ?? []
            return Figures(
                databases: databases, zones: zones, devices: devices, email: registered.emailAddress,
                shares: try server.shares(of: user))
        }
        guard let figures else { throw PageError(404, "no user \(user.rawValue) is registered") }
        let userPath = "/console/users/" + HTML.component(user.rawValue)
        var body = "<dl id=\"user\" data-user=\"\(HTML.escape(user.rawValue))\">"
        body += "<dt>e-mail</dt><dd>\(HTML.escape(figures.email ?? "—"))</dd>"
        body += "<dt>quota</dt><dd>\(server.quota(of: user).map { HTML.bytes(UInt64(max($0, 0))) } ?? "none")</dd>"
        body += "</dl>"
        let sharedTimeline = HTML.href(userPath + "/timeline", [("scope", "shared")])
        body +=
            "<p>Timelines: <a id=\"timeline\" href=\"\(HTML.href(userPath + "/timeline"))\">private database</a> · <a href=\"\(sharedTimeline)\">shared database</a></p>"
        body += "<h2>Databases</h2>"
        let rows = figures.databases.map { database in
            let scope = WireProtocol.scopeName(database.scope)
            return """
                <tr data-scope="\(scope)" data-entries="\(database.lastOffset)" data-zones="\(database.zones)" \
                data-shares="\(database.shares)" data-assets="\(database.assets)" data-usage="\(database.usage)">\
                <td>\(scope)</td><td class="n">\(database.lastOffset)</td><td>\(HTML.date(database.lastCommit))</td>\
                <td class="n">\(HTML.bytes(database.environmentBytes ?? 0))</td><td class="n">\(database.zones)</td>\
                <td class="n">\(database.shares)</td><td class="n">\(database.assets)\(database.assetsCapped ? "+" : "") (\(HTML.bytes(database.assetBytes)))</td>\
                <td class="n">\(HTML.bytes(database.usage))</td></tr>
                """
        }
        body += HTML.table(
            ["scope", "#entries", "last commit", "#store", "#zones", "#shares", "#assets", "#usage"], rows: rows,
            attributes: " id=\"databases\"")
        body += "<h2>Zones</h2>"
        for scope in [DatabaseScope.private, .shared] {
            let zones = figures.zones[scope] ?? []
            let name = WireProtocol.scopeName(scope)
            body += "<h3>\(name)</h3>"
            guard !zones.isEmpty else {
                body += "<p class=\"muted\">none</p>"
                continue
            }
            body += "<ul class=\"zones\" data-scope=\"\(name)\">"
            for zone in zones {
                let href = HTML.href(
                    userPath + "/records",
                    [("scope", name), ("zone", zone.zoneName), ("owner", zone.ownerName)])
                let owner = zone.ownerName == RecordZone.ID.defaultOwnerName ? "" : " (owner \(zone.ownerName))"
                body += "<li><a href=\"\(href)\">\(HTML.escape(zone.zoneName + owner))</a></li>"
            }
            body += "</ul>"
        }
        body += "<h2>Shares they own</h2>"
        let shareRows = figures.shares.map { share in
            """
            <tr data-share="\(HTML.escape(share.shareName))" data-accepted="\(share.accepted)" data-pending="\(share.pending)">\
            <td>\(HTML.escape(share.zone.zoneName))</td><td>\(HTML.escape(share.rootRecordName ?? "whole zone"))</td>\
            <td>\(HTML.escape("\(share.publicPermission)"))</td><td class="n">\(share.accepted)</td>\
            <td class="n">\(share.pending)</td><td class="n">\(share.removed)</td></tr>
            """
        }
        body += HTML.table(
            ["zone", "root", "public", "#accepted", "#pending", "#removed"], rows: shareRows,
            attributes: " id=\"shares\" data-count=\"\(figures.shares.count)\"")
        body += "<h2>Devices</h2>"
        if tokens.sessions == nil {
            body += "<p class=\"muted\">This server keeps no sessions.</p>"
        } else {
            let rows = figures.devices.sorted { $0.device.rawValue < $1.device.rawValue }.map { session in
                "<tr data-device=\"\(HTML.escape(session.device.rawValue))\"><td>\(HTML.escape(session.device.rawValue))</td><td>\(HTML.escape(session.name))</td><td>\(HTML.date(session.created))</td><td>\(HTML.date(session.refreshed))</td></tr>"
            }
            body += HTML.table(
                ["device", "name", "signed in", "refreshed"], rows: rows, attributes: " id=\"sessions\"")
        }
        let channels = server.pushListeners(of: user)
        body += "<h3>Push channels open on this node</h3>"
        body += HTML.table(
            ["scope", "device"],
            rows: channels.map { channel in
                "<tr><td>\(WireProtocol.scopeName(channel.scope))</td><td>\(HTML.escape(channel.device?.rawValue ?? "—"))</td></tr>"
            }, attributes: " id=\"channels\" data-count=\"\(channels.count)\"")
        // Support bundles the user uploaded (Docs/Privacy.md, "Uploaded bundles"): the
        // operator's to read, downloaded through the console session.
        let bundles = try await server.supportBundles(of: user)
        body += "<h2>Support bundles</h2>"
        body += HTML.table(
            ["uploaded", "bytes", "app", "library", "key ID", "offsets", ""],
            rows: bundles.map { bundle in
                "<tr data-bundle=\"\(bundle.id)\"><td>\(HTML.date(bundle.uploaded))</td><td>\(bundle.size)</td><td>\(HTML.escape(bundle.appVersion ?? "—"))</td><td>\(HTML.escape(bundle.libraryVersion))</td><td><code>\(HTML.escape(bundle.keyID))</code></td><td>\(bundle.firstOffset)–\(bundle.lastOffset)</td><td><a href=\"\(HTML.href("/console/bundles/\(bundle.id)"))\">data.mdb</a></td></tr>"
            }, attributes: " id=\"bundles\" data-count=\"\(bundles.count)\"")
        return HTML.page(title: "User \(user.rawValue)", body: body)
    }

    // MARK: Records

    func recordsPage(_ user: UserID, _ request: Request) async throws -> String {
        let query = request.uri.queryParameters
        let scope = try self.scope(query["scope"])
        let zone = try checked(
            RecordZone.ID(
                zoneName: query["zone"].map(String.init) ?? RecordZone.ID.defaultZoneName,
                ownerName: query["owner"].map(String.init) ?? RecordZone.ID.defaultOwnerName))
        let after = query["after"].map(String.init)
        let limit = try number(query["limit"], default: Self.recordsPerPage, max: Self.maxRecordsPerPage)
        let server = http.server
        let page = try await run { () throws -> [RecordSummary]? in
            guard try server.isRegistered(user) else { return nil }
            return try server.records(of: user, scope: scope, zone: zone, after: after, limit: limit)
        }
        guard let page else { throw PageError(404, "no user \(user.rawValue) is registered") }
        let userPath = "/console/users/" + HTML.component(user.rawValue)
        let scopeName = WireProtocol.scopeName(scope)
        let rows = page.map { record in
            let href = HTML.href(
                userPath + "/records/" + HTML.component(zone.zoneName) + "/" + HTML.component(record.recordName),
                [("scope", scopeName), ("owner", zone.ownerName)])
            return """
                <tr data-record="\(HTML.escape(record.recordName))"><td><a href="\(href)">\(HTML.escape(record.recordName))</a></td>\
                <td>\(HTML.escape(record.recordType))</td><td class="n">\(record.offset)</td><td class="n">\(record.size)</td>\
                <td>\(record.isTombstone ? "deleted" : "")</td></tr>
                """
        }
        var body =
            "<p><a href=\"\(HTML.href(userPath))\">\(HTML.escape(user.rawValue))</a> · \(scopeName) · zone \(HTML.escape(zone.zoneName))</p>"
        body += HTML.table(
            ["record", "type", "#last change (offset)", "#size"], rows: rows,
            attributes: " id=\"records\" data-count=\"\(page.count)\"")
        body += "<p class=\"pager\">"
        if after != nil {
            body +=
                "<a href=\"\(HTML.href(userPath + "/records", [("scope", scopeName), ("zone", zone.zoneName), ("owner", zone.ownerName)]))\">first page</a>"
        }
        if page.count == limit, let last = page.last {
            let href = HTML.href(
                userPath + "/records",
                [
                    ("scope", scopeName), ("zone", zone.zoneName), ("owner", zone.ownerName),
                    ("after", last.recordName),
                    ("limit", "\(limit)"),
                ])
            body += "<a id=\"next\" href=\"\(href)\">next page</a>"
        }
        body += "</p>"
        return HTML.page(title: "Records of \(user.rawValue)", body: body)
    }

    func recordPage(_ user: UserID, _ context: ServerRequestContext, _ request: Request) async throws -> String {
        let query = request.uri.queryParameters
        let scope = try self.scope(query["scope"])
        guard let zoneName = context.parameters.get("zone")?.removingPercentEncoding,
            let name = context.parameters.get("record")?.removingPercentEncoding
        else { throw PageError(400, "the zone or record name in the path is not percent-encoded UTF-8") }
        let zone = try checked(
            RecordZone.ID(
                zoneName: zoneName, ownerName: query["owner"].map(String.init) ?? RecordZone.ID.defaultOwnerName))
        let recordID = Record.ID(recordName: name, zoneID: zone)
        let server = http.server
        let changes = try await run { () throws -> [RecordChange]? in
            guard try server.isRegistered(user) else { return nil }
            return try server.recordHistory(of: user, scope: scope, recordID: recordID, within: Self.historyWindow)
        }
        guard let changes else { throw PageError(404, "no user \(user.rawValue) is registered") }
        let userPath = "/console/users/" + HTML.component(user.rawValue)
        var body =
            "<p><a href=\"\(HTML.href(userPath))\">\(HTML.escape(user.rawValue))</a> · \(WireProtocol.scopeName(scope)) · zone \(HTML.escape(zone.zoneName)) · record \(HTML.escape(name))</p>"
        body +=
            "<p class=\"muted\">The server-log entries among the last \(Self.historyWindow) that saved or deleted it, newest first.</p>"
        let recordTimeline = HTML.href(
            userPath + "/timeline", [("scope", WireProtocol.scopeName(scope)), ("record", name)])
        body += "<p><a href=\"\(recordTimeline)\">its timeline</a></p>"
        let rows = changes.map { change in
            let fields = change.fields.map { "\(HTML.escape($0.key)): \(HTML.escape($0.value))" }.joined(
                separator: "<br>")
            return
                "<tr data-offset=\"\(change.offset)\"><td class=\"n\">\(change.offset)</td><td>\(HTML.date(change.time))</td><td>\(change.kind)</td><td>\(HTML.escape(change.recordType))</td><td>\(fields)</td></tr>"
        }
        body += HTML.table(
            ["#offset", "time", "change", "type", "fields"], rows: rows,
            attributes: " id=\"history\" data-count=\"\(changes.count)\"")
        return HTML.page(title: "Record \(name)", body: body)
    }

    // MARK: Timeline

    func timelinePage(_ user: UserID, _ request: Request) async throws -> String {
        let query = request.uri.queryParameters
        let count = try number(query["entries"], default: Self.timelineEntries, max: Self.maxTimelineEntries)
        let scope = try self.scope(query["scope"])
        let record = query["record"].map(String.init)
        let server = http.server
        let picture = try await run { () throws -> (svg: String, first: UInt64, last: UInt64)? in
            guard try server.isRegistered(user) else { return nil }
            let log = try server.admin.log(of: user, scope: scope)
            let last = try log.lastOffset.rawValue
            guard last > 0 else { return ("", 0, 0) }
            let first = last >= UInt64(count) ? last - UInt64(count) + 1 : 1
            let timeline = try Timeline.build(
                devices: [], server: Timeline.Source(name: WireProtocol.scopeName(scope), log: log),
                options: Timeline.Options(record: record, serverOffsets: LogOffset(first)...LogOffset(last)))
            return (timeline.svg, first, last)
        }
        guard let picture else { throw PageError(404, "no user \(user.rawValue) is registered") }
        let userPath = "/console/users/" + HTML.component(user.rawValue)
        let scopeName = WireProtocol.scopeName(scope)
        let about = record.map { " · record " + HTML.escape($0) } ?? ""
        var body =
            "<p><a href=\"\(HTML.href(userPath))\">\(HTML.escape(user.rawValue))</a> · \(scopeName) database\(about)</p>"
        if picture.last == 0 {
            body += "<p id=\"timeline\" data-first=\"0\" data-last=\"0\">The log is empty.</p>"
        } else {
            body +=
                "<p class=\"muted\">Entries \(picture.first) to \(picture.last) of the server log (the last \(count)).</p>"
            body +=
                "<div id=\"timeline\" data-scope=\"\(scopeName)\" data-first=\"\(picture.first)\" data-last=\"\(picture.last)\">\(picture.svg)</div>"
        }
        let more = min(Self.maxTimelineEntries, count * 2)
        if picture.first > 1, more > count {
            let href = HTML.href(
                userPath + "/timeline", [("scope", scopeName), ("record", record), ("entries", "\(more)")])
            body += "<p class=\"pager\"><a href=\"\(href)\">the last \(more) entries</a></p>"
        }
        return HTML.page(title: "Timeline of \(user.rawValue)", body: body)
    }

    // MARK: Query values

    func number(_ text: Substring?, default value: Int, max: Int) throws -> Int {
        guard let text else { return value }
        guard let number = Int(text), (1...max).contains(number) else {
            throw PageError(400, "a count must be a number from 1 to \(max), not \"\(text)\"")
        }
        return number
    }

    func scope(_ text: Substring?) throws -> DatabaseScope {
        switch text {
        case nil, "private": return .private
        case "shared": return .shared
        default: throw PageError(400, "scope must be private or shared, not \"\(text!)\"")
        }
    }

    func checked(_ user: UserID) throws -> UserID {
        do throws(SyncError) { try user.validate() } catch { throw PageError(400, error.message) }
        return user
    }

    func checked(_ zone: RecordZone.ID) throws -> RecordZone.ID {
        do throws(SyncError) { try zone.validate() } catch { throw PageError(400, error.message) }
        return zone
    }
}
