extension RecordZone {
    /// The identity of a record zone: a zone name and the name of the user who owns the zone.
    ///
    /// Mirrors `CKRecordZone.ID` (F127). Creating an ID never fails; call ``validate()`` (or let
    /// the server do it) to check the naming rules.
    ///
    /// ```swift
    /// let notes = RecordZone.ID(zoneName: "Notes")   // owned by the current user
    /// let inbox = RecordZone.ID.default               // "_defaultZone"
    /// ```
    public struct ID: Sendable, Hashable, Codable, CustomStringConvertible {
        /// The zone's name, unique among the owner's zones in one database.
        public var zoneName: String
        /// The record name of the zone's owner; ``defaultOwnerName`` means the current user.
        public var ownerName: String

        /// The name of every database's default zone, `_defaultZone` (`CKRecordZone.ID.defaultZoneName`).
        public static let defaultZoneName = "_defaultZone"
        /// The owner name that stands for the current user, `__defaultOwner__` (`CKCurrentUserDefaultName`).
        public static let defaultOwnerName = "__defaultOwner__"
        /// The default zone of the current user's database (F127).
        public static let `default` = ID(zoneName: defaultZoneName, ownerName: defaultOwnerName)

        /// Creates a zone ID.
        ///
        /// - Parameters:
        ///   - zoneName: The zone's name; defaults to the default zone's name.
        ///   - ownerName: The owner's record name; defaults to the current user.
        public init(zoneName: String = ID.defaultZoneName, ownerName: String = ID.defaultOwnerName) {
            self.zoneName = zoneName
            self.ownerName = ownerName
        }

        /// Whether this is the default zone (`_defaultZone`), whoever owns it.
        public var isDefaultZone: Bool { zoneName == Self.defaultZoneName }

        /// A one-line rendering for messages, for example `zone "Notes"` or
        /// `zone "Notes" of owner "_abc"` when the owner is not the current user.
        public var description: String {
            if ownerName == Self.defaultOwnerName {
                return "zone \(quoted(zoneName))"
            }
            return "zone \(quoted(zoneName)) of owner \(quoted(ownerName))"
        }
    }
}
