import HTTPTypes
import Hummingbird
import LogSyncWire

/// The name of a request's route, as metrics label it and a request's span is named: bounded,
/// never a path, so that user names, scopes and digests never become labels.
enum RouteName {
    /// The name of a request's route, from the pattern the router matched (`endpointPath`, with
    /// its parameters in braces):
    /// the operation for the device and admin operation routes, a fixed name otherwise, and
    /// `unknown` for a path no route matches (or an operation there is not).
    static func of(_ request: Request, context: ServerRequestContext) -> String {
        guard let path = context.endpointPath else { return "unknown" }
        let method = request.method
        switch (method, path) {
        case (_, "/{version}/databases/{scope}/{operation}"):
            return operation(context.parameters.get("operation"))
        case (_, "/{version}/admin/databases/{user}/{scope}/{operation}"):
            return "admin " + operation(context.parameters.get("operation"))
        default:
            return Self.routes["\(method) \(path)"] ?? "\(method) \(path)"
        }
    }

    private static func operation(_ name: String?) -> String {
        name.flatMap { WireOperation(rawValue: $0) }?.rawValue ?? "unknown"
    }

    /// The names of the routes other than operations, by method and pattern. A route missing
    /// here is named by its method and pattern, which is as bounded.
    static let routes: [String: String] = [
        "GET /{version}/databases/{scope}/push": "push",
        "GET /{version}/databases/{scope}/assets/{digest}/upload": "asset upload status",
        "PUT /{version}/databases/{scope}/assets/{digest}": "asset upload",
        "GET /{version}/databases/{scope}/assets/{digest}": "asset download",
        "GET /{version}/bundles/{id}/upload": "bundle upload status",
        "PUT /{version}/bundles/{id}": "bundle upload",
        "GET /{version}/admin/bundles": "admin list bundles",
        "GET /{version}/admin/bundles/{id}": "admin download bundle",
        "POST /{version}/sessions": "sign-in",
        "POST /{version}/sessions/refresh": "refresh",
        "GET /{version}/devices": "devices",
        "DELETE /{version}/devices/{device}": "revoke device",
        "GET /{version}/admin/users": "admin list users",
        "POST /{version}/admin/users": "admin create user",
        "POST /{version}/admin/users/{user}/sessions": "admin mint session",
        "DELETE /{version}/admin/users/{user}/sessions": "admin revoke sessions",
        "DELETE /{version}/admin/users/{user}": "admin delete user",
        "GET /{version}/admin/changes": "admin changes",
        "GET /{version}/admin/overview": "admin overview",
        "POST /{version}/admin/console-links": "admin console link",
        "GET /health/live": "health live",
        "GET /health/ready": "health ready",
        "GET /metrics": "metrics",
        "GET /console": "console",
        "GET /console/enter/{code}": "console enter",
        "GET /console/users/{user}": "console user",
        "GET /console/users/{user}/records": "console records",
        "GET /console/users/{user}/records/{zone}/{record}": "console record",
        "GET /console/users/{user}/timeline": "console timeline",
        "GET /console/bundles/{id}": "console bundle",
    ]
}
