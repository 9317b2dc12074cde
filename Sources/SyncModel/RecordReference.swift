extension Record {
    /// A link from one record to another record in the same zone.
    ///
    /// Mirrors `CKRecord.Reference` (F135). References cross no zone boundary; a reference with
    /// ``Action-swift.enum/deleteSelf`` makes the referencing record go when its target is deleted.
    /// At most ``Limits/maxDeleteSelfReferencesPerTarget`` such references may point at one target.
    ///
    /// ```swift
    /// note["folder"] = .reference(Record.Reference(recordID: folderID, action: .deleteSelf))
    /// ```
    public struct Reference: Sendable, Hashable, Codable, CustomStringConvertible {
        /// What happens to the referencing record when the target is deleted; raw values match
        /// `CKRecord.ReferenceAction`.
        public enum Action: Int, Sendable, Hashable, Codable, CaseIterable {
            /// Nothing: the reference dangles.
            case none = 0
            /// The referencing record is deleted with its target (a cascade).
            case deleteSelf = 1
        }

        /// The target record's ID.
        public var recordID: ID
        /// The delete action.
        public var action: Action

        /// Creates a reference to a record ID.
        ///
        /// - Parameters:
        ///   - recordID: The target record's ID.
        ///   - action: The delete action; defaults to ``Action-swift.enum/none``.
        public init(recordID: ID, action: Action = .none) {
            self.recordID = recordID
            self.action = action
        }

        /// Creates a reference to a record.
        ///
        /// - Parameters:
        ///   - record: The target record.
        ///   - action: The delete action; defaults to ``Action-swift.enum/none``.
        public init(record: Record, action: Action = .none) {
            self.init(recordID: record.recordID, action: action)
        }

        /// A one-line rendering, for example `Reference(record "f" in zone "Notes", deleteSelf)`.
        public var description: String {
            "Reference(\(recordID), \(action == .deleteSelf ? "deleteSelf" : "none"))"
        }
    }
}
