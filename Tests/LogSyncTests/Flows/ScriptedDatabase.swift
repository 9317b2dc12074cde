import Foundation
import SyncModel
import Synchronization

/// A `CloudDatabase` in memory, with no server behind it: each request is recorded and answered
/// with the next answer the test scripted for its kind, as NIO's `EmbeddedChannel` lets a test
/// drive one handler alone. The engine's flows (`SendFlow`, `FetchFlow`) are tested against it.
///
/// ```swift
/// let database = ScriptedDatabase()
/// database.answer(ModifyRecordsRequest.self) { request in
///     ModifyRecordsResponse(saveResults: [note: .success(saved)])
/// }
/// database.fail(ModifyRecordsRequest.self, SyncError(.serverResponseLost, "lost"))
/// ...
/// #expect(database.requests(ModifyRecordsRequest.self).map(\.requestID) == [id, id])
/// ```
///
/// Answers of one kind are used in the order they were scripted, one per request. A request with
/// no answer left fails with `internalError` naming it, so a test sees any request it did not
/// expect (in ``requestNames`` too).
final class ScriptedDatabase: CloudDatabase {
    /// Stands for the request of `allSubscriptions()`, which has no request value.
    struct AllSubscriptions: Sendable, Hashable {}
    /// Stands for the request of `currentUserRecordID()`.
    struct CurrentUser: Sendable, Hashable {}

    let databaseScope: DatabaseScope
    private let script = Mutex(Script())

    private struct Script {
        /// Per request type, the answers not used yet, in order.
        var answers: [ObjectIdentifier: [@Sendable (any Sendable) throws -> any Sendable]] = [:]
        /// Every request, in the order it came.
        var requests: [any Sendable] = []
    }

    init(scope: DatabaseScope = .private) { self.databaseScope = scope }

    // MARK: Scripting

    /// Answers the next request of type `Request` not answered yet with what `answer` returns or
    /// throws.
    func answer<Request: Sendable, Response: Sendable>(
        _ request: Request.Type, _ answer: @escaping @Sendable (Request) throws -> Response
    ) {
        script.withLock { script in
            script.answers[ObjectIdentifier(request), default: []].append { try answer($0 as! Request) }
        }
    }

    /// Fails the next request of type `Request` not answered yet with `error`.
    func fail<Request: Sendable>(_ request: Request.Type, _ error: SyncError) {
        answer(request) { (_: Request) throws -> Never in throw error }
    }

    // MARK: Reading what was asked

    /// The requests of type `Request`, in order.
    func requests<Request: Sendable>(_ type: Request.Type) -> [Request] {
        script.withLock { $0.requests.compactMap { $0 as? Request } }
    }

    /// The type name of every request, in order, such as `ModifyRecordsRequest`.
    var requestNames: [String] {
        script.withLock { $0.requests.map { "\(type(of: $0))" } }
    }

    /// Records `request` and answers it with its next scripted answer.
    private func respond<Request: Sendable, Response>(to request: Request) throws -> Response {
        let answer = script.withLock { script -> (@Sendable (any Sendable) throws -> any Sendable)? in
            script.requests.append(request)
            let key = ObjectIdentifier(Request.self)
            guard var answers = script.answers[key], !answers.isEmpty else { return nil }
            let next = answers.removeFirst()
            script.answers[key] = answers
            return next
        }
        guard let answer else {
            throw SyncError(.internalError, "ScriptedDatabase: no answer scripted for \(Request.self) \(request)")
        }
        return try answer(request) as! Response
    }

    // MARK: CloudDatabase

    func modifyZones(_ request: ModifyZonesRequest) async throws -> ModifyZonesResponse { try respond(to: request) }
    func fetchZones(_ request: FetchZonesRequest) async throws -> FetchZonesResponse { try respond(to: request) }
    func modifyRecords(_ request: ModifyRecordsRequest) async throws -> ModifyRecordsResponse {
        try respond(to: request)
    }

    func fetchDatabaseChanges(_ request: FetchDatabaseChangesRequest) async throws -> FetchDatabaseChangesResponse {
        try respond(to: request)
    }

    func fetchZoneChanges(_ request: FetchZoneChangesRequest) async throws -> FetchZoneChangesResponse {
        try respond(to: request)
    }

    func modifySubscriptions(_ request: ModifySubscriptionsRequest) async throws -> ModifySubscriptionsResponse {
        try respond(to: request)
    }

    func allSubscriptions() async throws -> [Subscription] { try respond(to: AllSubscriptions()) }
    func currentUserRecordID() async throws -> Record.ID { try respond(to: CurrentUser()) }
    func uploadAsset(_ request: AssetUploadRequest) async throws -> AssetUploadResponse { try respond(to: request) }
    func downloadAsset(_ request: AssetDownloadRequest) async throws -> AssetDownloadResponse {
        try respond(to: request)
    }

    /// No push hints: the stream ends at once.
    func pushHints() -> AsyncStream<PushHint> { AsyncStream { $0.finish() } }
}
