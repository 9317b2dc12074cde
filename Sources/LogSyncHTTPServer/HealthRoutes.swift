import Foundation
import HTTPTypes
import Hummingbird
import LogSyncServer
import LogSyncWire
import NIOCore
import Synchronization

/// `GET /health/live` and `GET /health/ready` (Docs/Deployment.md, "Health"), for load
/// balancers and orchestrators. They take no token and show nothing of any user.
///
/// - live: the process serves HTTP (200 while it answers at all).
/// - ready: the node may take traffic: its store answers (the registry's end read through the
///   storage, within ``storeTimeout``; on PostgreSQL a query, after the schema's migrations,
///   which run before the server starts) and, on a storage other nodes share, it hears their
///   notices (push hints and revocations). 503 otherwise, naming the check that failed.
struct HealthRoutes: Sendable {
    let http: HTTPSyncServer

    /// How long the store check may take before the node is reported not ready.
    static let storeTimeout: Duration = .seconds(5)

    /// The answer's body.
    struct Health: Encodable {
        var status: String
        var checks: [String: String]
    }

    func live(_ request: Request, context: ServerRequestContext) -> Response {
        JSONRoutes.response(.ok, Health(status: "live", checks: [:]))
    }

    func ready(_ request: Request, context: ServerRequestContext) async -> Response {
        var checks: [String: String] = [:]
        var ready = true
        let server = http.server
        switch await Self.within(Self.storeTimeout, { try await server.storage.perform { try server.checkStore() } }) {
        case .success?:
            checks["store"] = "ok"
        case .failure(let error)?:
            ready = false
            checks["store"] = "failed: \(error)"
        case nil:
            ready = false
            checks["store"] = "no answer within \(Self.storeTimeout)"
        }
        switch server.storage.hearsOtherNodes {
        case true?: checks["notifications"] = "listening"
        case false?:
            ready = false
            checks["notifications"] = "not listening: other nodes' push hints and revocations go unheard"
        case nil: break
        }
        if !ready {
            context.logger.warning("not ready", metadata: ["checks": "\(checks)"])
        }
        return JSONRoutes.response(
            ready ? .ok : .serviceUnavailable, Health(status: ready ? "ready" : "not ready", checks: checks))
    }

    /// `body`'s outcome, or `nil` when it takes longer than `limit`: it then goes on, unwaited
    /// (a store call that hangs cannot be interrupted), and the answer does not wait for it.
    static func within<R: Sendable>(
        _ limit: Duration, _ body: @escaping @Sendable () async throws -> R
    ) async -> Result<R, any Error>? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<R, any Error>?, Never>) in
            let answered = Mutex(false)
            let finish: @Sendable (Result<R, any Error>?) -> Void = { outcome in
                let first = answered.withLock { answered in
                    defer { answered = true }
                    return !answered
                }
                if first { continuation.resume(returning: outcome) }
            }
            let timer = Task {
                try? await Task.sleep(for: limit)
                finish(nil)
            }
            Task {
                do {
                    finish(.success(try await body()))
                } catch {
                    finish(.failure(error))
                }
                timer.cancel()
            }
        }
    }
}
