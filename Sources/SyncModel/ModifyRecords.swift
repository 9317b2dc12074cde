import Foundation

/// A request to save and delete records (F132, F145–F148, F151, F159, F160).
///
/// Each saved record sends its changed keys (F132) and its change tag, compared according to
/// ``savePolicy`` (F145). With ``atomically``, the changes of each zone commit together or not
/// at all (F148). A ``requestID`` makes a retry return the first outcome (F160).
public struct ModifyRecordsRequest: Sendable, Hashable, Codable {
    /// The records to save, with their changed keys and change tags.
    public var recordsToSave: [Record]
    /// The records to delete.
    public var recordIDsToDelete: [Record.ID]
    /// How change tags are compared; the engine always uses ``SavePolicy/ifServerRecordUnchanged``.
    public var savePolicy: SavePolicy
    /// Whether each zone's changes commit all-or-nothing (CloudKit's default is `true`).
    public var atomically: Bool
    /// The client's ID for the request, which makes retries idempotent (F160).
    public var requestID: RequestID?
    /// Opaque client data the server echoes in later zone change fetches (F159).
    public var clientChangeToken: Data?
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`. Not part of
    /// the request's content: a retry under the same ``requestID`` may carry another group.
    public var operationGroup: OperationGroup?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - recordsToSave: The records to save.
    ///   - recordIDsToDelete: The records to delete.
    ///   - savePolicy: How change tags are compared; defaults to `ifServerRecordUnchanged`.
    ///   - atomically: Whether each zone's changes commit all-or-nothing; defaults to `true`.
    ///   - requestID: The client's ID for the request.
    ///   - clientChangeToken: Opaque client data to echo in zone change fetches.
    ///   - operationGroup: The operation group the request belongs to (F69).
    public init(
        recordsToSave: [Record] = [], recordIDsToDelete: [Record.ID] = [],
        savePolicy: SavePolicy = .ifServerRecordUnchanged, atomically: Bool = true,
        requestID: RequestID? = nil, clientChangeToken: Data? = nil, operationGroup: OperationGroup? = nil
    ) {
        self.operationGroup = operationGroup
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
        self.savePolicy = savePolicy
        self.atomically = atomically
        self.requestID = requestID
        self.clientChangeToken = clientChangeToken
    }

    /// The approximate size of the request for the 2 MB limit: the sum of the saved records'
    /// ``Record/estimatedSize`` (non-asset field data; deletions count nothing).
    public var estimatedSize: Int {
        recordsToSave.reduce(0) { $0 + $1.estimatedSize }
    }

    /// Checks the request as a whole (F151): its request ID (``Identifier/requestID``), its
    /// operation group (``OperationGroup/validate(requestID:)``), at most
    /// 400 items, at most 2 MB, no record named twice.
    ///
    /// Each record's own checks (``Record/validate()``) give per-item errors instead, so that a
    /// bad record fails alone (or fails its atomic zone, F148).
    ///
    /// - Throws: ``SyncError`` `limitExceeded` or `invalidArguments`, naming the request.
    public func validate() throws(SyncError) {
        try requestID?.validate()
        try operationGroup?.validate(requestID: requestID)
        try RequestChecks.checkItemCount(
            recordsToSave.count + recordIDsToDelete.count, operation: "modifyRecords", requestID: requestID)
        let size = estimatedSize
        if size > Limits.maxRequestBytes {
            throw SyncError(
                .limitExceeded,
                "modifyRecords carries \(size) bytes of field data, more than \(Limits.maxRequestBytes); split it",
                requestID: requestID)
        }
        try RequestChecks.checkNoDuplicates(
            recordsToSave.map(\.recordID) + recordIDsToDelete, operation: "modifyRecords",
            requestID: requestID, item: { .record($0) })
    }
}

/// The per-record outcomes of a ``ModifyRecordsRequest``.
///
/// Every record of the request has exactly one entry: the saved record as the server now holds
/// it, with new system fields (F158), or the record's error — `serverRecordChanged` with the
/// server's record, `batchRequestFailed` for atomic siblings, and so on. Cascaded deletions do
/// not appear (F136). A whole-request failure is thrown instead; `partialFailure` never is.
public typealias ModifyRecordsResponse = ModifyResponse<Record.ID, Record>
