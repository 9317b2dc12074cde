extension SyncError {
    /// The kind of failure, with raw values equal to `CKError.Code`'s.
    ///
    /// Extensible: a code this build does not know (from a newer server) keeps its raw value and
    /// is described as `code(N)`. Compare with the static members.
    ///
    /// ```swift
    /// if error.code == .serverRecordChanged { merge(into: error.serverRecord) }
    /// ```
    public struct Code: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        /// The raw value, the same as `CKError.Code`'s.
        public let rawValue: Int

        /// Creates a code from its raw value.
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// A server or client bug (1).
        public static let internalError = Code(rawValue: 1)
        /// Some items of a request failed; see ``SyncError/partialErrors`` (2, F101).
        public static let partialFailure = Code(rawValue: 2)
        /// The network is not available (3, transient).
        public static let networkUnavailable = Code(rawValue: 3)
        /// The network was available but the request failed (4, transient).
        public static let networkFailure = Code(rawValue: 4)
        /// The container is unknown or not authorized (5).
        public static let badContainer = Code(rawValue: 5)
        /// The service is unavailable; see ``SyncError/retryAfter`` (6, transient).
        public static let serviceUnavailable = Code(rawValue: 6)
        /// The client sent too many requests; see ``SyncError/retryAfter`` (7, transient).
        public static let requestRateLimited = Code(rawValue: 7)
        /// The app lacks an entitlement (8).
        public static let missingEntitlement = Code(rawValue: 8)
        /// No user is signed in, or the credentials were rejected (9, transient).
        public static let notAuthenticated = Code(rawValue: 9)
        /// The user may not perform the operation (10).
        public static let permissionFailure = Code(rawValue: 10)
        /// The item does not exist, e.g. a save with a change tag of a deleted record (11, F94, F145).
        public static let unknownItem = Code(rawValue: 11)
        /// The request was malformed: a bad name, token or limit (12, F126, F127, F142).
        public static let invalidArguments = Code(rawValue: 12)
        /// Deprecated by CloudKit; results were truncated (13).
        public static let resultsTruncated = Code(rawValue: 13)
        /// The change tag did not match the server's record; see ``SyncError/serverRecord`` (14, F92, F145).
        public static let serverRecordChanged = Code(rawValue: 14)
        /// The server rejected the request (15).
        public static let serverRejectedRequest = Code(rawValue: 15)
        /// An asset's file could not be found (16).
        public static let assetFileNotFound = Code(rawValue: 16)
        /// An asset's file was modified while it was being saved (17).
        public static let assetFileModified = Code(rawValue: 17)
        /// The client's version is no longer supported (18).
        public static let incompatibleVersion = Code(rawValue: 18)
        /// A unique-field constraint was violated (19).
        public static let constraintViolation = Code(rawValue: 19)
        /// The operation was cancelled (20).
        public static let operationCancelled = Code(rawValue: 20)
        /// The change token is too old; fetch again from `nil` (21, F100, F144).
        public static let changeTokenExpired = Code(rawValue: 21)
        /// The item failed only because another item of its atomic zone failed (22, F95, F148).
        public static let batchRequestFailed = Code(rawValue: 22)
        /// The zone is busy; retry later (23, transient, F152).
        public static let zoneBusy = Code(rawValue: 23)
        /// The operation is not allowed in this database (24, F147).
        public static let badDatabase = Code(rawValue: 24)
        /// The storage quota is exhausted (25, F97, F153).
        public static let quotaExceeded = Code(rawValue: 25)
        /// The zone does not exist (26, F93, F147, F149).
        public static let zoneNotFound = Code(rawValue: 26)
        /// The request or a record is too large (27, F96, F134, F151).
        public static let limitExceeded = Code(rawValue: 27)
        /// The user deleted the zone from settings (28, F98, F150).
        public static let userDeletedZone = Code(rawValue: 28)
        /// A share has too many participants (29).
        public static let tooManyParticipants = Code(rawValue: 29)
        /// The record or zone is already shared (30).
        public static let alreadyShared = Code(rawValue: 30)
        /// A reference's target does not exist or is in another zone (31).
        public static let referenceViolation = Code(rawValue: 31)
        /// The account is managed and may not use the service (32).
        public static let managedAccountRestricted = Code(rawValue: 32)
        /// A share participant may need to verify their identity (33).
        public static let participantMayNeedVerification = Code(rawValue: 33)
        /// The response was lost; the request may have been applied (34, F103, F160).
        public static let serverResponseLost = Code(rawValue: 34)
        /// The asset is not available (35).
        public static let assetNotAvailable = Code(rawValue: 35)
        /// The account is signed in but not ready yet (36, transient).
        public static let accountTemporarilyUnavailable = Code(rawValue: 36)
        /// The participant was already invited to the share (37, newer SDKs).
        public static let participantAlreadyInvited = Code(rawValue: 37)
        /// LogSync's own: this device holds no key for the zone's encrypted fields yet (1001,
        /// F129); another device of the zone wraps one for it. Not in `CKError.Code`.
        public static let zoneKeyUnavailable = Code(rawValue: 1001)
        /// LogSync's own: an encrypted field failed to open: tampered ciphertext, a key that is
        /// not the one it was sealed with, or a wrapped key addressed to another device (1002,
        /// F129). Not in `CKError.Code`.
        public static let decryptionFailed = Code(rawValue: 1002)

        /// Every code this build knows, in raw-value order.
        public static let allKnown: [Code] = [
            .internalError, .partialFailure, .networkUnavailable, .networkFailure, .badContainer,
            .serviceUnavailable, .requestRateLimited, .missingEntitlement, .notAuthenticated,
            .permissionFailure, .unknownItem, .invalidArguments, .resultsTruncated,
            .serverRecordChanged, .serverRejectedRequest, .assetFileNotFound, .assetFileModified,
            .incompatibleVersion, .constraintViolation, .operationCancelled, .changeTokenExpired,
            .batchRequestFailed, .zoneBusy, .badDatabase, .quotaExceeded, .zoneNotFound,
            .limitExceeded, .userDeletedZone, .tooManyParticipants, .alreadyShared,
            .referenceViolation, .managedAccountRestricted, .participantMayNeedVerification,
            .serverResponseLost, .assetNotAvailable, .accountTemporarilyUnavailable,
            .participantAlreadyInvited, .zoneKeyUnavailable, .decryptionFailed,
        ]

        /// The seven codes the engine retries by itself, waiting for good conditions (F89).
        ///
        /// `operationCancelled` is deliberately absent: Apple's sample retries it, but the
        /// header's list (and F89) does not name it.
        public static let transient: Set<Code> = [
            .notAuthenticated, .accountTemporarilyUnavailable, .networkFailure, .networkUnavailable,
            .requestRateLimited, .serviceUnavailable, .zoneBusy,
        ]

        /// Whether the engine retries this code by itself (one of the seven codes of F89).
        public var isTransient: Bool { Self.transient.contains(self) }

        /// The code's Swift name, such as `serverRecordChanged`, or `code(N)` for an unknown code.
        public var name: String {
            let index = rawValue - 1
            if index >= 0, index < Self.names.count { return Self.names[index] }
            if let name = Self.ownNames[rawValue] { return name }
            return "code(\(rawValue))"
        }

        /// The code's name and raw value, such as `serverRecordChanged (14)`.
        public var description: String {
            (rawValue >= 1 && rawValue <= Self.names.count) || Self.ownNames[rawValue] != nil
                ? "\(name) (\(rawValue))" : name
        }

        private static let names = [
            "internalError", "partialFailure", "networkUnavailable", "networkFailure", "badContainer",
            "serviceUnavailable", "requestRateLimited", "missingEntitlement", "notAuthenticated",
            "permissionFailure", "unknownItem", "invalidArguments", "resultsTruncated",
            "serverRecordChanged", "serverRejectedRequest", "assetFileNotFound", "assetFileModified",
            "incompatibleVersion", "constraintViolation", "operationCancelled", "changeTokenExpired",
            "batchRequestFailed", "zoneBusy", "badDatabase", "quotaExceeded", "zoneNotFound",
            "limitExceeded", "userDeletedZone", "tooManyParticipants", "alreadyShared",
            "referenceViolation", "managedAccountRestricted", "participantMayNeedVerification",
            "serverResponseLost", "assetNotAvailable", "accountTemporarilyUnavailable",
            "participantAlreadyInvited",
        ]

        /// LogSync's own codes, above CloudKit's.
        private static let ownNames = [1001: "zoneKeyUnavailable", 1002: "decryptionFailed"]

        /// Decodes a code from its raw value.
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(Int.self)
        }

        /// Encodes the code as its raw value.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }
}
