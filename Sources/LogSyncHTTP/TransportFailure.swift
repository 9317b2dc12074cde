import AsyncHTTPClient
import Foundation
import LogSyncWire
import NIOCore
import NIOPosix
import NIOSSL
import SyncModel

/// How a failure of the network becomes a ``SyncError`` the engine knows what to do with.
///
/// | failure | code |
/// |---|---|
/// | the calling task was cancelled | `operationCancelled` |
/// | no connection could be made (refused, unreachable, connect timeout, name not found) | `networkFailure` (transient, F89) |
/// | no connection could be made because this process or the system has no file descriptor left (`EMFILE`, `ENFILE`) | `networkFailure`, saying so: nothing was sent |
/// | the TLS handshake failed: the server's certificate is not trusted or not for this host, or the server does not speak TLS | `networkFailure`, saying so: nothing was sent |
/// | the connection failed after the request may have been sent, for `modifyRecords` | `serverResponseLost` (F103: resent once with the same request ID) |
/// | the same, for any other operation (reads, and zone and subscription saves, which are idempotent) | `networkFailure` |
/// | the same, for an asset upload or download (resumed from where the server's or the partial file's bytes end) | `networkFailure` |
/// | an asset transfer in which no byte moved for ``HTTPSyncClient/Configuration/assetStallTimeout`` | `networkFailure`, saying so |
///
/// The underlying error is kept in ``SyncError/cause``.
///
/// A certificate failure is `networkFailure`, retried, rather than a code the engine gives up on:
/// a refused certificate is often the network's doing (a captive portal, an intercepting proxy)
/// or a passing fault (a certificate renewed late, a device clock that is wrong), and a
/// non-transient code would make the engine drop the pending changes of the request (F21).
/// Nothing leaves the device before the handshake succeeds, so the changes are safe to keep.
enum TransportFailure {
    static func map(_ error: any Error, operation: WireOperation, server: URL) -> SyncError {
        map(error, doing: operation.rawValue, mayHaveApplied: operation == .modifyRecords, server: server)
    }

    /// The error of a failure of the network during `operation` (a name for messages, such as
    /// `uploadAsset`); `mayHaveApplied` makes a failure after sending `serverResponseLost`, for a
    /// request that is not safe to repeat.
    static func map(_ error: any Error, doing operation: String, mayHaveApplied: Bool, server: URL) -> SyncError {
        let cause = "\(error)"
        if error is CancellationError || (error as? HTTPClientError) == .cancelled || Task.isCancelled {
            return SyncError(.operationCancelled, "\(operation) was cancelled", cause: cause)
        }
        if let problem = tlsHandshakeFailure(error) {
            return SyncError(
                .networkFailure,
                "\(operation) could not connect securely to the server at \(server.absoluteString): \(problem)",
                cause: cause)
        }
        if outOfDescriptors(error) {
            return SyncError(
                .networkFailure,
                "\(operation) could not open a connection to the server at \(server.absoluteString): this process has "
                    + "no file descriptor left (raise its limit, `ulimit -n`, or open fewer connections)",
                cause: cause)
        }
        if neverConnected(error) {
            return SyncError(
                .networkFailure, "\(operation) could not connect to the server at \(server.absoluteString)",
                cause: cause)
        }
        if mayHaveApplied {
            return SyncError(
                .serverResponseLost,
                "the connection failed after \(operation) was sent; the server may have applied it", cause: cause)
        }
        return SyncError(.networkFailure, "the connection to the server failed during \(operation)", cause: cause)
    }

    /// What went wrong if the error is a failed TLS handshake (before which nothing is sent), or
    /// `nil`.
    static func tlsHandshakeFailure(_ error: any Error) -> String? {
        if let error = error as? NIOSSLExtraError {
            if error == .failedToValidateHostname { return "its TLS certificate is not for this host name" }
            return "TLS could not start (\(error))"
        }
        guard let error = error as? NIOSSLError else { return nil }
        switch error {
        case .handshakeFailed(let reason):
            let text = "\(reason)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return
                    "its TLS certificate is not trusted (\(text)); set HTTPSyncClient.Configuration.tlsConfiguration to trust a private CA"
            }
            if text.contains("WRONG_VERSION_NUMBER") || text.contains("PACKET_LENGTH_TOO_LONG") {
                return "the TLS handshake failed; does the server speak HTTPS on this port? (\(text))"
            }
            return "the TLS handshake failed (\(text))"
        case .unableToValidateCertificate, .noCertificateToValidate, .cannotMatchULabel, .cannotFindPeerIP:
            return "its TLS certificate could not be validated (\(error))"
        default:
            return nil
        }
    }

    /// Whether the error is this process (`EMFILE`) or the system (`ENFILE`) running out of file
    /// descriptors while making a connection: nothing was sent, and a later attempt may find one.
    static func outOfDescriptors(_ error: any Error) -> Bool {
        if let error = error as? IOError { return [EMFILE, ENFILE].contains(error.errnoCode) }
        if let error = error as? NIOConnectionError {
            return error.connectionErrors.contains { outOfDescriptors($0.error) }
                || error.dnsAError.map(outOfDescriptors) == true || error.dnsAAAAError.map(outOfDescriptors) == true
        }
        return false
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
