import SyncModel

extension SyncEngine {
    /// A record change the engine is to send: save or delete one record, by ID.
    ///
    /// Mirrors `CKSyncEngine.PendingRecordZoneChange` (F16). It holds the ID only: the record's
    /// contents are asked of the delegate when a batch is built, so the pending list stays small
    /// whatever the records weigh. Two changes are equal when they have the same case and ID.
    ///
    /// ```swift
    /// try engine.state.add(pendingRecordZoneChanges: [.saveRecord(noteID), .deleteRecord(oldID)])
    /// ```
    public enum PendingRecordZoneChange: Hashable, Sendable, CustomStringConvertible {
        /// Save the record with this ID (the delegate provides its contents at send time).
        case saveRecord(Record.ID)
        /// Delete the record with this ID.
        case deleteRecord(Record.ID)

        /// The ID of the record concerned.
        public var recordID: Record.ID {
            switch self {
            case .saveRecord(let id), .deleteRecord(let id): id
            }
        }

        /// A one-line rendering, such as `saveRecord(record "n1" in zone "Notes")`.
        public var description: String {
            switch self {
            case .saveRecord(let id): "saveRecord(\(id))"
            case .deleteRecord(let id): "deleteRecord(\(id))"
            }
        }
    }

    /// A database change the engine is to send: save or delete one record zone.
    ///
    /// Mirrors `CKSyncEngine.PendingDatabaseChange` (F22). The engine sends these itself, before
    /// record changes (F23, F47). Equality and hashing look at the case and the zone ID only, so
    /// two `saveZone` changes of distinct zone values with the same ID are the same change: the
    /// pending list holds it once, and `remove` finds it by ID.
    ///
    /// ```swift
    /// try engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Notes"))])
    /// ```
    public enum PendingDatabaseChange: Hashable, Sendable, CustomStringConvertible {
        /// Save (create) this zone.
        case saveZone(RecordZone)
        /// Delete the zone with this ID, and every record in it.
        case deleteZone(RecordZone.ID)

        /// The ID of the zone concerned.
        public var zoneID: RecordZone.ID {
            switch self {
            case .saveZone(let zone): zone.zoneID
            case .deleteZone(let id): id
            }
        }

        /// Same case and same zone ID (F22); a saved zone's other properties do not count.
        public static func == (lhs: Self, rhs: Self) -> Bool {
            switch (lhs, rhs) {
            case (.saveZone(let a), .saveZone(let b)): a.zoneID == b.zoneID
            case (.deleteZone(let a), .deleteZone(let b)): a == b
            default: false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .saveZone(let zone):
                hasher.combine(0)
                hasher.combine(zone.zoneID)
            case .deleteZone(let id):
                hasher.combine(1)
                hasher.combine(id)
            }
        }

        /// A one-line rendering, such as `saveZone(zone "Notes")`.
        public var description: String {
            switch self {
            case .saveZone(let zone): "saveZone(\(zone.zoneID))"
            case .deleteZone(let id): "deleteZone(\(id))"
            }
        }
    }
}
