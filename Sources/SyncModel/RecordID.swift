import Foundation

extension Record {
    /// The identity of a record: a record name and the zone that holds the record.
    ///
    /// Mirrors `CKRecord.ID` (F126). The ID is unique within one database; the same ID may be
    /// used in another database. Creating an ID never fails; call ``validate()`` (or let the
    /// server do it) to check the naming rules.
    ///
    /// ```swift
    /// let id = Record.ID(recordName: "note-1", zoneID: RecordZone.ID(zoneName: "Notes"))
    /// ```
    public struct ID: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The record's name, unique within its zone.
        public var recordName: String
        /// The zone that holds the record.
        public var zoneID: RecordZone.ID

        /// Creates a record ID.
        ///
        /// - Parameters:
        ///   - recordName: The record's name; see ``validate()`` for the rules.
        ///   - zoneID: The zone that holds the record; defaults to the default zone.
        public init(recordName: String, zoneID: RecordZone.ID = .default) {
            self.recordName = recordName
            self.zoneID = zoneID
        }

        /// Creates a record ID with a new random UUID string as its name, as `CKRecord.ID()` does.
        ///
        /// Meant for apps; engine and server code, which must be deterministic, pass explicit names.
        ///
        /// - Parameter zoneID: The zone that holds the record; defaults to the default zone.
        public init(zoneID: RecordZone.ID = .default) {
            self.init(recordName: UUID().uuidString, zoneID: zoneID)
        }

        /// A one-line rendering for messages, for example `record "note-1" in zone "Notes"`.
        public var description: String {
            "record \(quoted(recordName)) in \(zoneID)"
        }
    }
}
