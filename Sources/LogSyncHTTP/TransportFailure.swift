import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOPosix
import SyncModel

/// How a failure of the network becomes a ``SyncError`` the engine knows what to do with.
///
/// | failure | code |
/// |---|---|
/// | the calling task was cancelled | `operationCancelled` |
/// | no connection could be made (refused, unreachable, connect timeout, name not found) | `networkFailure` (transient, F89) |
/// | the connection failed after the request may have been sent, for `modifyRecords` | `serverResponseLost` (F103: resent once with the same request ID) |
/// | the same, for any other operation (reads, and zone and subscription saves, which are idempotent) | `networkFailure` |
///
/// The underlying error is kept in ``SyncError/cause``.
enum TransportFailure {
    static func map(_ error: any Error, operation: WireOperation, server: URL) -> SyncError {
        let cause = "\(error)"
        if error is CancellationError || (error as? HTTPClientError) == .cancelled || Task.isCancelled {
            return SyncError(.operationCancelled, "\(operation) was cancelled", cause: cause)
        }
        if neverConnected(error) {
            return SyncError(.networkFailure, "\(operation) could not connect to the server at \(server.absoluteString)", cause: cause)
        }
        if operation == .modifyRecords {
            return SyncError(
                .serverResponseLost,
                "the connection failed after \(operation) was sent; the server may have applied it", cause: cause)
        }
        return SyncError(.networkFailure, "the connection to the server failed during \(operation)", cause: cause)
    }

    /// Whether the error says no connection was made, so the request cannot have been sent.
    static func neverConnected(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError {
            return error == .connectTimeout || error == .invalidURL || error == .emptyHost || error == .emptyScheme
                || error == .getConnectionFromPoolTimeout
        }
        if error is NIOConnectionError { return true }
        if let error = error as? ChannelError, case .connectTimeout = error { return true }
        if let error = error as? IOError {
            return [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ETIMEDOUT].contains(error.errnoCode)
        }
        if error is SocketAddressError { return true }
        return false
    }
}
