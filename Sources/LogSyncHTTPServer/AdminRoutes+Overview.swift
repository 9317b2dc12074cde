import Foundation
import Hummingbird
import LogSyncServer
import LogSyncWire
import SyncModel

/// `GET /v1/admin/overview?after=USER&limit=N` (Docs/Protocol.md, "Admin API", "Overview"): a
/// page of ``ServerOverview``, what `logsync-server status` prints.
extension AdminRoutes {
    func registerOverviewRoute(on router: Router<ServerRequestContext>) {
        router.get("/:version/admin/overview") { request, context in
            await overview(request, context: context)
        }
    }

    func overview(_ request: Request, context: ServerRequestContext) async -> Response {
        await answer(request, context: context, route: "overview") { _ throws(HTTPFailure) in
            let query = request.uri.queryParameters
            let after = try query["after"].map { text throws(HTTPFailure) in try Self.user(String(text)) }
            var limit = ServerOverview.defaultUsersPerPage
            if let text = query["limit"] {
                guard let number = Int(text), (1...ServerOverview.maxUsersPerPage).contains(number) else {
                    throw HTTPFailure(
                        400,
                        SyncError(
                            .invalidArguments,
                            "limit must be a number from 1 to \(ServerOverview.maxUsersPerPage), not \"\(text)\""))
                }
                limit = number
            }
            let operations = self.operations
            let pageSize = limit
            return .json(try await json.run("storage") { try operations.overview(after: after, limit: pageSize) })
        }
    }
}
