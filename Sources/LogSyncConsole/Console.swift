import Foundation
import HTTPTypes
import Hummingbird
import LogSyncHTTPServer
import LogSyncServer
import LogSyncWire
import NIOCore
import SyncModel

/// The operations console: read-only HTML pages of the server's state, served by
/// `logsync-server` behind the admin credential (Docs/Deployment.md, "Console").
///
/// ```swift
/// var http = HTTPSyncServer(server: server, tokens: tokens, adminCredential: admin)
/// if let console = Console(http: http, history: history) { http.routeExtensions.append(console.routes) }
/// ```
///
/// Pages: `/console` (users, totals, recent errors, charts), `/console/users/{user}` (their
/// databases, zones, devices, shares), `/console/users/{user}/records?zone=…` (a page of records),
/// `/console/users/{user}/records/{zone}/{record}` (a record's history in the server log) and
/// `/console/users/{user}/timeline` (the picture of the log's last entries). Every page is
/// paginated and reads only indexes and a bounded number of entries.
///
/// A request needs the admin token as `Authorization: Bearer` or the cookie of a console
/// session, which a one-time link opens: `POST /v1/admin/console-links` (admin token) answers
/// `/console/enter/<code>?next=…`, usable once within 60 seconds. Without either, every console
/// path answers the same 401, whether or not what it names exists. No page shows a token, a
/// key wrap or a sealed value: an encrypted field is shown as `sealed, N bytes`.
public struct Console: Sendable {
    /// The server whose state is shown.
    public let http: HTTPSyncServer
    /// The admin credential the console asks for.
    public let credential: AdminCredential
    /// The last hour of metrics, for the charts and recent errors; without it, none are drawn.
    public let history: MetricsHistory?
    let sessions: ConsoleSessions

    /// The name of the console session's cookie.
    public static let cookieName = "logsync_console"

    /// The console of `http`, whose admin credential it asks for.
    ///
    /// - Parameters:
    ///   - http: The server; it must have an admin credential (else `nil`).
    ///   - history: The metrics history the charts read.
    ///   - now: The clock of console links and sessions.
    public init?(http: HTTPSyncServer, history: MetricsHistory? = nil, now: @escaping @Sendable () -> Date = { Date() })
    {
        guard let credential = http.adminCredential else { return nil }
        self.http = http
        self.credential = credential
        self.history = history
        sessions = ConsoleSessions(now: now)
    }

    /// Adds the console's routes to `router`: what `HTTPSyncServer.routeExtensions` takes.
    public var routes: @Sendable (Router<ServerRequestContext>) -> Void {
        { [self] router in register(on: router) }
    }

    func register(on router: Router<ServerRequestContext>) {
        router.post("/:version/admin/console-links") { request, context in
            await consoleLink(request, context: context)
        }
        router.get("/console/enter/:code") { request, context in
            enter(request, context: context)
        }
        router.get("/console") { request, context in
            await page(request) { try await overviewPage(request) }
        }
        router.get("/console/users/:user") { request, context in
            await page(request) { try await userPage(try user(context)) }
        }
        router.get("/console/users/:user/records") { request, context in
            await page(request) { try await recordsPage(try user(context), request) }
        }
        router.get("/console/users/:user/records/:zone/:record") { request, context in
            await page(request) { try await recordPage(try user(context), context, request) }
        }
        router.get("/console/users/:user/timeline") { request, context in
            await page(request) { try await timelinePage(try user(context), request) }
        }
        router.get("/console/bundles/:id") { request, context in
            await bundleDownload(request, context: context)
        }
        router.get("/console/**") { request, context in
            await page(request) { throw PageError(404, "no console page at \(request.uri.path)") }
        }
    }

    // MARK: Sign-in

    /// Whether `request` carries the admin token or a console session's cookie.
    func isAuthorized(_ request: Request) -> Bool {
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            return credential.accepts(String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces))
        }
        if let cookie = request.cookies[Self.cookieName] {
            return sessions.accepts(session: cookie.value)
        }
        return false
    }

    /// `POST /v1/admin/console-links`: a one-time link to the console page `next`.
    func consoleLink(_ request: Request, context: ServerRequestContext) async -> Response {
        guard context.parameters.get("version") == WireProtocol.versionPath else {
            return Self.json(404, SyncError(.serverRejectedRequest, "no such route: \(request.uri.path)"))
        }
        guard isAuthorized(request), request.headers[.authorization] != nil else {
            return Self.json(401, SyncError(.notAuthenticated, "invalid admin credential"))
        }
        let bytes: ByteBuffer
        do {
            bytes = try await request.body.collect(upTo: 4_096)
        } catch {
            return Self.json(413, SyncError(.limitExceeded, "the request body is larger than 4096 bytes"))
        }
        var next = "/console"
        if bytes.readableBytes > 0 {
            do {
                let asked = try WireSessions.decode(WireConsole.LinkRequest.self, from: Array(buffer: bytes))
                if let path = asked.next { next = path }
            } catch {
                return Self.json(
                    400, SyncError(.invalidArguments, "the request body is not the JSON this route takes: \(error)"))
            }
        }
        guard Self.isConsolePath(next) else {
            return Self.json(
                400, SyncError(.invalidArguments, "next must be a path under /console, such as /console/users/alice"))
        }
        let code = sessions.newCode()
        let link = WireConsole.Link(
            path: "/console/enter/\(code)?next=\(HTML.component(next))", expiresIn: Int(ConsoleSessions.codeLifetime))
        return Self.json(200, link)
    }

    /// `GET /console/enter/<code>?next=…`: opens a console session for a code not used before
    /// and sends the browser on to `next`.
    func enter(_ request: Request, context: ServerRequestContext) -> Response {
        guard let code = context.parameters.get("code"), let session = sessions.redeem(code) else {
            return Self.unauthorized()
        }
        let asked = request.uri.queryParameters["next"].map(String.init) ?? "/console"
        let next = Self.isConsolePath(asked) ? asked : "/console"
        var headers = Self.pageHeaders()
        headers[.location] = next
        let secure = http.configuration.tlsConfiguration == nil ? "" : "; Secure"
        headers[.setCookie] =
            "\(Self.cookieName)=\(session); Path=/console; Max-Age=\(Int(ConsoleSessions.sessionLifetime)); HttpOnly; SameSite=Strict\(secure)"
        return Response(status: .seeOther, headers: headers)
    }

    /// A relative path under `/console`, with nothing that could lead elsewhere.
    static func isConsolePath(_ path: String) -> Bool {
        guard path == "/console" || path.hasPrefix("/console/") || path.hasPrefix("/console?") else { return false }
        return !path.contains("//") && !path.contains("\\") && !path.contains("..")
            && path.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }

    // MARK: Answers

    /// A page's failure: its status and what to say.
    struct PageError: Error {
        var status: Int
        var message: String
        init(_ status: Int, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    /// Answers `render`'s page once the request is authorized, or the same 401 for any path.
    func page(_ request: Request, _ render: () async throws -> String) async -> Response {
        guard isAuthorized(request) else { return Self.unauthorized() }
        do {
            return Self.html(200, try await render())
        } catch let error as PageError {
            return Self.html(
                error.status, HTML.page(title: "\(error.status)", body: "<p>\(HTML.escape(error.message))</p>"))
        } catch {
            return Self.html(
                503, HTML.page(title: "503", body: "<p>the store failed: \(HTML.escape("\(error)"))</p>"))
        }
    }

    static func unauthorized() -> Response {
        html(
            401,
            HTML.page(
                title: "401",
                body:
                    "<p>The console asks for the admin token: open a link made by <code>logsync-server console-link</code>.</p>"
            ))
    }

    static func pageHeaders() -> HTTPFields {
        var headers = HTTPFields()
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] =
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; form-action 'self'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }

    static func html(_ status: Int, _ text: String) -> Response {
        var headers = pageHeaders()
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// `value` in JSON, or a refusal in the wire's error body.
    static func json(_ status: Int, _ value: any Encodable) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = WireFormat.json.mediaType
        headers[.cacheControl] = "no-store"
        let body = (value as? SyncError).map { Wire.encode($0, as: .json) } ?? WireSessions.encode(value)
        return Response(
            status: HTTPResponse.Status(code: status), headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `GET /console/bundles/{id}`: an uploaded support bundle's `data.mdb`, for the operator's
    /// console session (or admin token); the same 401 as every page otherwise, whether or not
    /// the bundle exists.
    func bundleDownload(_ request: Request, context: ServerRequestContext) async -> Response {
        guard isAuthorized(request) else { return Self.unauthorized() }
        let server = http.server
        let id = context.parameters.get("id") ?? ""
        let found: StoredBundle?
        do {
            found = try await server.supportBundle(id: id)
        } catch {
            return Self.html(503, HTML.page(title: "503", body: "<p>the store failed: \(HTML.escape("\(error)"))</p>"))
        }
        guard let bundle = found else {
            return Self.html(
                404, HTML.page(title: "404", body: "<p>no support bundle \(HTML.escape(id)) is stored</p>"))
        }
        var headers = Self.pageHeaders()
        headers[.contentType] = "application/octet-stream"
        headers[.contentDisposition] = "attachment; filename=\"\(bundle.id.prefix(16)).lsb-data.mdb\""
        let body = ResponseBody(contentLength: Int(bundle.size)) { writer in
            var offset: Int64 = 0
            while offset < bundle.size {
                let piece = try await server.readSupportBundle(bundle, from: offset, maxLength: 1 << 20)
                guard !piece.isEmpty else { break }
                try await writer.write(ByteBuffer(bytes: piece))
                offset += Int64(piece.count)
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: headers, body: body)
    }

    // MARK: Reading

    /// The `{user}` of the path, percent-decoded and checked.
    func user(_ context: ServerRequestContext) throws -> UserID {
        guard let raw = context.parameters.get("user"), let text = raw.removingPercentEncoding else {
            throw PageError(400, "the user ID in the path is not percent-encoded UTF-8")
        }
        let user = UserID(rawValue: text)
        do throws(SyncError) { try user.validate() } catch { throw PageError(400, error.message) }
        return user
    }

    /// Runs the blocking `body` where the storage allows blocking.
    func run<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        do {
            return try await http.server.storage.perform(body)
        } catch let error as SyncError where error.code == .invalidArguments {
            throw PageError(400, error.message)
        }
    }
}
