import Foundation
import Hummingbird
import LogSyncServer
import LogSyncWire
import Logging
import SyncModel

/// The admin routes of user management (Docs/Protocol.md, "Admin API", "Users"): each runs the
/// ``AdminOperations`` that `logsync-server user …` runs too, once the admin token is accepted.
extension AdminRoutes {
    /// Under `:version`, as every route: the router does not fall back from a literal segment to
    /// a parameter.
    func registerUserRoutes(on router: Router<ServerRequestContext>) {
        router.get("/:version/admin/users") { request, context in
            await listUsers(request, context: context)
        }
        router.post("/:version/admin/users") { request, context in
            await createUser(request, context: context)
        }
        router.post("/:version/admin/users/:user/sessions") { request, context in
            await mintSession(request, context: context)
        }
        router.delete("/:version/admin/users/:user/sessions") { request, context in
            await revokeSessions(request, context: context)
        }
        router.delete("/:version/admin/users/:user") { request, context in
            await deleteUser(request, context: context)
        }
    }

    var operations: AdminOperations { AdminOperations(server: http.server, tokens: http.tokens) }

    func listUsers(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "list users") { _ throws(HTTPFailure) in
            let query = request.uri.queryParameters
            let after = try query["after"].map { text throws(HTTPFailure) in try Self.user(String(text)) }
            var limit = WireAdmin.defaultUsersPerPage
            if let text = query["limit"] {
                guard let number = Int(text), (1...WireAdmin.maxUsersPerPage).contains(number) else {
                    throw HTTPFailure(
                        400,
                        SyncError(
                            .invalidArguments,
                            "limit must be a number from 1 to \(WireAdmin.maxUsersPerPage), not \"\(text)\""))
                }
                limit = number
            }
            let operations = self.operations
            let pageSize = limit
            let users = try await json.run("user registry") { try operations.users(after: after, limit: pageSize) }
            return .json(
                WireAdmin.Users(
                    users: users.map(Self.wire),
                    next: users.count == pageSize ? users.last?.user.rawValue : nil))
        }
    }

    func createUser(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "create user") { logger throws(HTTPFailure) in
            let body: WireAdmin.CreateUser = try await json.decodedBody(request)
            let user = try Self.user(body.user)
            if let email = body.email {
                do throws(SyncError) {
                    try UserIdentity.validate(emailAddress: email)
                } catch {
                    throw HTTPFailure(400, error)
                }
            }
            let operations = self.operations
            let created = try await json.run("user registry") {
                try operations.createUser(user, email: body.email)
            }
            logger.info("user registered", metadata: ["user": "\(user.rawValue)"])
            return .json(Self.wire(created))
        }
    }

    func mintSession(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "mint session") { logger throws(HTTPFailure) in
            guard http.tokens.sessions != nil else {
                throw HTTPFailure(
                    404, SyncError(.serverRejectedRequest, "this server keeps no sessions, so it mints none"))
            }
            let user = try Self.user(parameter: context)
            let body: WireAdmin.MintSession = try await json.decodedBody(request)
            let device = try SessionRoutes.device(body.device)
            let operations = self.operations
            let issued = try await json.run("session store") {
                try operations.mintSession(for: user, device: device, name: body.name ?? "")
            }
            logger.info(
                "session minted", metadata: ["user": "\(user.rawValue)", "device": "\(device.rawValue)"])
            return .json(SessionRoutes.tokens(issued))
        }
    }

    func revokeSessions(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "revoke sessions") { logger throws(HTTPFailure) in
            let user = try Self.user(parameter: context)
            let operations = self.operations
            let revoked = try await json.run("token store") { try operations.revokeCredentials(of: user) }
            logger.info(
                "user's credentials revoked",
                metadata: [
                    "user": "\(user.rawValue)", "sessions": "\(revoked.sessions)", "tokens": "\(revoked.tokens)",
                ])
            return .json(WireAdmin.Revoked(sessions: revoked.sessions, tokens: revoked.tokens))
        }
    }

    func deleteUser(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "delete user") { logger throws(HTTPFailure) in
            let user = try Self.user(parameter: context)
            let operations = self.operations
            let existed = try await json.run("storage") { try operations.deleteUser(user) }
            if existed { logger.notice("user deleted", metadata: ["user": "\(user.rawValue)"]) }
            return .noContent
        }
    }

    // MARK: Steps

    /// The `{user}` of the path, percent-decoded and checked by `UserID.validate()`.
    static func user(parameter context: ServerRequestContext) throws(HTTPFailure) -> UserID {
        try user(OperationRoutes.pathParameter("user", of: context, naming: "the user ID"))
    }

    /// `text` as a user ID, checked by `UserID.validate()`.
    static func user(_ text: String) throws(HTTPFailure) -> UserID {
        let user = UserID(rawValue: text)
        do throws(SyncError) {
            try user.validate()
        } catch {
            throw HTTPFailure(400, error)
        }
        return user
    }

    static func wire(_ summary: AdminOperations.UserSummary) -> WireAdmin.User {
        WireAdmin.User(user: summary.user.rawValue, email: summary.emailAddress, sessions: summary.sessions)
    }
}
