import SyncModel

/// The zones and records the entry description suites name: alice's `Notes`, the zone `Shared`
/// bob shares with her, and a record by name. A suite adopts it instead of declaring them.
protocol EntryIDs {}

extension EntryIDs {
    static var notes: RecordZone.ID { RecordZone.ID(zoneName: "Notes") }
    static var bobs: RecordZone.ID { RecordZone.ID(zoneName: "Shared", ownerName: "_bob") }

    /// The record `name` in `zone` (`Notes` by default).
    static func id(_ name: String, in zone: RecordZone.ID = RecordZone.ID(zoneName: "Notes")) -> Record.ID {
        Record.ID(recordName: name, zoneID: zone)
    }
}
