import Foundation
import SyncModel

/// How whole-request errors travel over HTTP: a status chosen from the error's code, and the
/// error itself, exactly, in the body (``Wire/encode(_:as:)-(SyncError,_)``).
///
/// The client reads the error from the body, so the status is for people, proxies and logs; it
/// falls back on ``code(forStatus:)`` only when a response has no error body (a proxy's 502, a
/// route this server does not have).
public enum WireStatus {
    /// The HTTP status of a response carrying `code` as its whole-request error: every code
    /// `SyncError/Code/allKnown` lists has the status Docs/Protocol.md ("HTTP", "Errors")
    /// gives it; a code this build does not know gets 500.
    ///
    /// | status | codes |
    /// |---|---|
    /// | 400 | invalidArguments, badDatabase, badContainer, missingEntitlement, referenceViolation, tooManyParticipants, alreadyShared, assetFileNotFound, assetFileModified, participantMayNeedVerification, participantAlreadyInvited |
    /// | 401 | notAuthenticated |
    /// | 403 | permissionFailure, managedAccountRestricted |
    /// | 404 | zoneNotFound, unknownItem, userDeletedZone, assetNotAvailable, incompatibleVersion, serverRejectedRequest |
    /// | 409 | serverRecordChanged, batchRequestFailed, constraintViolation |
    /// | 410 | changeTokenExpired |
    /// | 413 | limitExceeded |
    /// | 429 | requestRateLimited |
    /// | 499 | operationCancelled (the client went away) |
    /// | 500 | internalError, and the codes only a client raises: partialFailure, networkUnavailable, networkFailure, resultsTruncated, serverResponseLost, zoneKeyUnavailable, decryptionFailed |
    /// | 503 | serviceUnavailable, zoneBusy, accountTemporarilyUnavailable |
    /// | 507 | quotaExceeded |
    public static func status(for code: SyncError.Code) -> Int {
        switch code {
        case .invalidArguments, .badDatabase, .badContainer, .missingEntitlement, .referenceViolation,
            .tooManyParticipants,
            .alreadyShared, .assetFileNotFound, .assetFileModified, .participantMayNeedVerification,
            .participantAlreadyInvited:
            400
        case .notAuthenticated: 401
        case .permissionFailure, .managedAccountRestricted: 403
        case .zoneNotFound, .unknownItem, .userDeletedZone, .assetNotAvailable, .incompatibleVersion,
            .serverRejectedRequest:
            404
        case .serverRecordChanged, .batchRequestFailed, .constraintViolation: 409
        case .changeTokenExpired: 410
        case .limitExceeded: 413
        case .requestRateLimited: 429
        case .operationCancelled: 499
        case .internalError, .partialFailure, .networkUnavailable, .networkFailure, .resultsTruncated,
            .serverResponseLost,
            .zoneKeyUnavailable, .decryptionFailed:
            500
        case .serviceUnavailable, .zoneBusy, .accountTemporarilyUnavailable: 503
        case .quotaExceeded: 507
        default: 500
        }
    }

    /// The error code a response with `status` and no error body stands for.
    ///
    /// Statuses of a server or proxy that is down or overloaded (502, 503, 504) give
    /// `serviceUnavailable` and 429 `requestRateLimited`, which the engine retries (F89); 401
    /// gives `notAuthenticated`, 403 `permissionFailure`, 413 `limitExceeded`, 404 and other
    /// 4xx `serverRejectedRequest`, anything else `internalError`.
    public static func code(forStatus status: Int) -> SyncError.Code {
        switch status {
        case 401: .notAuthenticated
        case 403: .permissionFailure
        case 413: .limitExceeded
        case 429: .requestRateLimited
        case 502, 503, 504: .serviceUnavailable
        case 400..<500: .serverRejectedRequest
        default: .internalError
        }
    }

    /// The `Retry-After` header's value for an error's `SyncError/retryAfter`: whole seconds,
    /// rounded up, at least 1. The body carries the exact duration.
    public static func retryAfterHeader(for error: SyncError) -> String? {
        guard let seconds = error.retryAfterSeconds else { return nil }
        return String(max(1, Int(seconds.rounded(.up))))
    }

    /// The duration of a `Retry-After` header in seconds (the HTTP-date form is not read).
    public static func retryAfter(header: String?) -> Duration? {
        guard let header, let seconds = Int(header.trimmingCharacters(in: .whitespaces)), seconds >= 0 else {
            return nil
        }
        return .seconds(seconds)
    }
}
