// Naming rules of F126 and F127, and the per-record checks of F129, F134 and F135.

/// The ways a name can break the rules, named in error messages.
enum NameRule {
    /// Checks the rules shared by every name: not empty, ASCII only, at most 255 characters.
    ///
    /// - Returns: The broken rule in words, or `nil` if the name passes.
    static func commonViolation(_ name: String) -> String? {
        if name.isEmpty { return "must not be empty" }
        if !name.utf8.allSatisfy({ $0 < 0x80 }) { return "must be ASCII" }
        if name.utf8.count > Limits.maxNameLength {
            return "is \(name.utf8.count) characters long, more than \(Limits.maxNameLength)"
        }
        return nil
    }

    /// Checks a name that must not start with an underscore, apart from one allowed exception.
    static func violation(_ name: String, allowing exception: String? = nil) -> String? {
        if let problem = commonViolation(name) { return problem }
        if name.hasPrefix("_"), name != exception { return "must not start with \"_\"" }
        return nil
    }
}

extension RecordZone.ID {
    /// Checks the naming rules of F127.
    ///
    /// The zone name and the owner name are not empty, ASCII and at most 255 characters, and the
    /// zone name does not start with `_` unless it is `_defaultZone`.
    ///
    /// - Throws: ``SyncError`` with code `invalidArguments` whose message names this zone ID and
    ///   the broken rule.
    public func validate() throws(SyncError) {
        if let problem = NameRule.violation(zoneName, allowing: Self.defaultZoneName) {
            throw SyncError(.invalidArguments, "invalid zone name \(quoted(zoneName)) in \(self): \(problem)",
                            item: .zone(self))
        }
        if let problem = NameRule.commonViolation(ownerName) {
            throw SyncError(.invalidArguments, "invalid owner name \(quoted(ownerName)) in \(self): \(problem)",
                            item: .zone(self))
        }
    }
}

extension Record.ID {
    /// Checks the naming rules of F126 and the zone ID's rules of F127.
    ///
    /// The record name is not empty, ASCII, at most 255 characters and does not start with `_`.
    ///
    /// - Throws: ``SyncError`` with code `invalidArguments` whose message names this record ID and
    ///   the broken rule.
    public func validate() throws(SyncError) {
        if let problem = NameRule.violation(recordName) {
            throw SyncError(.invalidArguments, "invalid record name \(quoted(recordName)) in \(self): \(problem)",
                            item: .record(self))
        }
        do throws(SyncError) {
            try zoneID.validate()
        } catch {
            var error = error
            error.item = .record(self)
            error.message += " (for \(self))"
            throw error
        }
    }
}

extension Record {
    /// Checks everything about one record that a server checks before saving it.
    ///
    /// In order: the record ID (F126, F127); the record type and every field key (not empty,
    /// ASCII, at most 255 characters); every reference, including ``parent``, points into the
    /// record's own zone (F135); lists are homogeneous and not nested (F129); and the record's
    /// ``estimatedSize`` is at most ``Limits/maxRecordBytes`` (F134).
    ///
    /// - Throws: ``SyncError`` naming this record: `invalidArguments` for a broken rule,
    ///   `limitExceeded` for a record that is too large.
    /// - Complexity: O(n) in the size of the fields.
    public func validate() throws(SyncError) {
        try recordID.validate()
        func invalid(_ message: String) -> SyncError {
            SyncError(.invalidArguments, message, item: .record(recordID))
        }
        if let problem = NameRule.commonViolation(recordType) {
            throw invalid("invalid record type \(quoted(recordType)): \(problem)")
        }
        if let parent, parent.recordID.zoneID != recordID.zoneID {
            throw invalid("parent \(parent.recordID) is not in the record's zone")
        }
        for key in allKeys() {
            if let problem = NameRule.commonViolation(key) {
                throw invalid("invalid field key \(quoted(key)): \(problem)")
            }
            guard let value = self[key] else { continue }
            if let problem = violation(of: value) {
                throw invalid("field \(quoted(key)): \(problem)")
            }
        }
        let size = estimatedSize
        if size > Limits.maxRecordBytes {
            throw SyncError(
                .limitExceeded,
                "record holds \(size) bytes of field data, more than \(Limits.maxRecordBytes)",
                item: .record(recordID))
        }
    }

    /// Checks one field value: references stay in the zone, lists are homogeneous and flat.
    private func violation(of value: RecordValue) -> String? {
        switch value {
        case .reference(let reference):
            if reference.recordID.zoneID != recordID.zoneID {
                return "reference to \(reference.recordID) leaves the record's zone"
            }
        case .list(let elements):
            guard let first = elements.first else { return nil }
            for element in elements {
                if case .list = element { return "lists must not be nested" }
                if element.kindName != first.kindName {
                    return "list mixes \(first.kindName) and \(element.kindName) values"
                }
                if let problem = violation(of: element) { return problem }
            }
        default:
            break
        }
        return nil
    }
}
