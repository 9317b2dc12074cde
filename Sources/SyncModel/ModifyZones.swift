/// A request to save and delete record zones (F147, F149, F156).
///
/// The server answers each zone separately: saving an existing zone succeeds and returns it,
/// deleting a zone removes its records and starts a new incarnation if it is saved again.
public struct ModifyZonesRequest: Sendable, Hashable, Codable {
    /// The zones to create (or save again).
    public var zonesToSave: [RecordZone]
    /// The zones to delete.
    public var zoneIDsToDelete: [RecordZone.ID]
    /// The operation group the request belongs to, for the server's telemetry (F69), or `nil`.
    public var operationGroup: OperationGroup?

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - zonesToSave: The zones to create (or save again).
    ///   - zoneIDsToDelete: The zones to delete.
    ///   - operationGroup: The operation group the request belongs to (F69).
    public init(
        zonesToSave: [RecordZone] = [], zoneIDsToDelete: [RecordZone.ID] = [], operationGroup: OperationGroup? = nil
    ) {
        self.zonesToSave = zonesToSave
        self.zoneIDsToDelete = zoneIDsToDelete
        self.operationGroup = operationGroup
    }

    /// Checks the request as a whole: its operation group, at most 400 items, and no zone named
    /// twice.
    ///
    /// Each zone's own checks (``RecordZone/ID/validate()``) give per-zone errors instead.
    ///
    /// - Throws: ``SyncError`` `limitExceeded` or `invalidArguments`.
    public func validate() throws(SyncError) {
        try operationGroup?.validate()
        try RequestChecks.checkItemCount(zonesToSave.count + zoneIDsToDelete.count, operation: "modifyZones")
        try RequestChecks.checkNoDuplicates(
            zonesToSave.map(\.zoneID) + zoneIDsToDelete, operation: "modifyZones", item: { .zone($0) })
    }
}

/// The per-zone outcomes of a ``ModifyZonesRequest``.
///
/// Every zone of the request has exactly one entry: a saved zone as the server now holds it
/// (with its capabilities), or the zone's error.
public typealias ModifyZonesResponse = ModifyResponse<RecordZone.ID, RecordZone>
