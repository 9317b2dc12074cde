/// An error from a server database or the sync engine, shaped like `CKError`.
///
/// ``code`` has the raw values of `CKError.Code`; the other fields carry what CloudKit puts in
/// the error's user info: the conflicting records of `serverRecordChanged` (F92), the wait of
/// `retryAfter` (F90), the per-item errors of `partialFailure` (F101) and the zone deletion
/// reason behind `userDeletedZone` and `zoneNotFound` (F98, F99). ``description`` is one line that
/// names the code and the item or request concerned.
///
/// ```swift
/// do { try await engine.sendChanges() }
/// catch let error as SyncError where error.code == .serverRecordChanged {
///     var merged = error.serverRecord!      // merge into the server's copy
///     merged["title"] = localTitle
/// }
/// ```
public struct SyncError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The kind of failure.
    public var code: Code
    /// What happened, in words; may be empty.
    public var message: String
    /// The record, zone or subscription the error concerns, if it concerns one item.
    public var item: ItemID?
    /// The request the error concerns, if known.
    public var requestID: RequestID?
    /// For `serverRecordChanged`: the server's current record, the one to merge into (F92).
    public var serverRecord: Record?
    /// For `serverRecordChanged`: the record the client tried to save.
    public var clientRecord: Record?
    /// For `serverRecordChanged`: the version both sides started from, when the server knows it.
    public var ancestorRecord: Record?
    /// How long to wait before retrying, when the server says (F90, F152).
    ///
    /// A `Duration` (not a `TimeInterval`) because the engine schedules on an injected
    /// `Clock<Duration>`; ``retryAfterSeconds`` gives CloudKit's form.
    public var retryAfter: Duration?
    /// For `partialFailure`: the error of each failed item (F101).
    public var partialErrors: [ItemID: SyncError]
    /// Why the zone is gone: `purged` with `userDeletedZone` (F98, F150), `encryptedDataReset`
    /// with `zoneNotFound` (F99), `deleted` when known for `zoneNotFound`.
    public var zoneDeletionReason: ZoneDeletionReason?
    /// The underlying cause in words, such as a transport error; text so the error stays `Codable`.
    public var cause: String?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: What happened, in words.
    ///   - item: The item the error concerns, if any.
    ///   - requestID: The request the error concerns, if any.
    ///   - retryAfter: How long to wait before retrying, if the server says.
    ///   - partialErrors: Per-item errors, for `partialFailure`.
    ///   - zoneDeletionReason: Why the zone is gone, for zone errors.
    ///   - cause: The underlying cause in words.
    public init(
        _ code: Code, _ message: String = "", item: ItemID? = nil, requestID: RequestID? = nil,
        retryAfter: Duration? = nil, partialErrors: [ItemID: SyncError] = [:],
        zoneDeletionReason: ZoneDeletionReason? = nil, cause: String? = nil
    ) {
        self.code = code
        self.message = message
        self.item = item
        self.requestID = requestID
        self.serverRecord = nil
        self.clientRecord = nil
        self.ancestorRecord = nil
        self.retryAfter = retryAfter
        self.partialErrors = partialErrors
        self.zoneDeletionReason = zoneDeletionReason
        self.cause = cause
    }

    /// Creates a `serverRecordChanged` error carrying the three records of a conflict (F92, F145).
    ///
    /// - Parameters:
    ///   - serverRecord: The server's current record.
    ///   - clientRecord: The record the client tried to save.
    ///   - ancestorRecord: The common ancestor, if known.
    ///   - message: What happened, in words.
    public static func serverRecordChanged(
        serverRecord: Record, clientRecord: Record?, ancestorRecord: Record? = nil, _ message: String = ""
    ) -> SyncError {
        var error = SyncError(.serverRecordChanged, message, item: .record(serverRecord.recordID))
        error.serverRecord = serverRecord
        error.clientRecord = clientRecord
        error.ancestorRecord = ancestorRecord
        return error
    }

    /// Whether the engine retries this error by itself (one of the seven codes of F89).
    public var isTransient: Bool { code.isTransient }

    /// ``retryAfter`` in seconds, CloudKit's `retryAfterSeconds`.
    public var retryAfterSeconds: Double? {
        guard let retryAfter else { return nil }
        let (seconds, attoseconds) = retryAfter.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whether the zone's encrypted data was reset (F99), CloudKit's
    /// `CKErrorUserDidResetEncryptedDataKey`.
    public var userDidResetEncryptedDataKey: Bool { zoneDeletionReason == .encryptedDataReset }

    /// One line: the code, the item and request concerned, the message and the salient details.
    ///
    /// For example `serverRecordChanged (14) for record "n1" in zone "Notes": tag "3" is stale`.
    public var description: String {
        var text = code.description
        if let item { text += " for \(item)" }
        if let requestID { text += " in \(requestID)" }
        let words = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        if !words.isEmpty { text += ": \(words)" }
        var details: [String] = []
        if let zoneDeletionReason { details.append("zone \(zoneDeletionReason)") }
        if let seconds = retryAfterSeconds { details.append("retry after \(seconds) s") }
        if !partialErrors.isEmpty {
            details.append("\(partialErrors.count) item error\(partialErrors.count == 1 ? "" : "s")")
        }
        if let cause {
            details.append("cause: \(cause.split(whereSeparator: \.isNewline).joined(separator: " "))")
        }
        if !details.isEmpty { text += " (\(details.joined(separator: "; ")))" }
        return text
    }
}
