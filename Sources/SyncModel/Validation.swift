// Naming rules of F126 and F127 (through `Identifier`), and the per-record checks of F129, F134
// and F135.

extension RecordZone.ID {
    /// Checks the naming rules of F127 (``Identifier/zoneName``, ``Identifier/ownerName``).
    ///
    /// The zone name and the owner name are not empty, ASCII, at most 255 characters, without
    /// control characters, and the zone name does not start with `_` unless it is `_defaultZone`.
    ///
    /// - Throws: ``SyncError`` with code `invalidArguments` whose message names this zone ID and
    ///   the broken rule.
    public func validate() throws(SyncError) {
        try Identifier.zoneName.validate(
            zoneName, allowing: Self.defaultZoneName, item: .zone(self), context: " in \(self)")
        try Identifier.ownerName.validate(ownerName, item: .zone(self), context: " in \(self)")
    }
}

extension Record.ID {
    /// Checks the naming rules of F126 and the zone ID's rules of F127.
    ///
    /// The record name (``Identifier/recordName``) is not empty, ASCII, at most 255 characters,
    /// without control characters, and does not start with `_`.
    ///
    /// - Throws: ``SyncError`` with code `invalidArguments` whose message names this record ID and
    ///   the broken rule.
    public func validate() throws(SyncError) {
        try Identifier.recordName.validate(recordName, item: .record(self), context: " in \(self)")
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
    /// In order: the record ID (F126, F127); the record type and every field key
    /// (``Identifier/recordType``, ``Identifier/fieldKey``); every reference, including ``parent``, points into the
    /// record's own zone (F135); lists are homogeneous and not nested (F129); every asset has
    /// a digest and a size of at most ``Limits/maxAssetBytes``; and the record's
    /// ``estimatedSize`` is at most ``Limits/maxRecordBytes`` (F134).
    ///
    /// - Throws: ``SyncError`` naming this record: `invalidArguments` for a broken rule,
    ///   `limitExceeded` for a record that is too large.
    /// - Complexity: O(n) in the size of the fields.
    public func validate() throws(SyncError) {
        _ = try validatedSize()
    }

    /// ``validate()``, returning the ``estimatedSize`` it measured (a server saving the record
    /// needs it next).
    package func validatedSize() throws(SyncError) -> Int {
        try recordID.validate()
        func invalid(_ message: String) -> SyncError {
            SyncError(.invalidArguments, message, item: .record(recordID))
        }
        if let problem = Identifier.recordType.violation(recordType) {
            throw invalid("invalid record type \(Identifier.shown(recordType)): \(problem)")
        }
        if let parent {
            if parent.recordID.zoneID != recordID.zoneID {
                throw invalid("parent \(parent.recordID) is not in the record's zone")
            }
            if let problem = Identifier.recordName.violation(parent.recordID.recordName) {
                throw invalid(
                    "invalid record name \(Identifier.shown(parent.recordID.recordName)) of the parent: \(problem)")
            }
        }
        // The fields in their own order, and only when one breaks a rule again in key order, so
        // that the error names the first such key.
        let broken = fields.contains { key, value in
            Identifier.fieldKey.violation(key) != nil || violation(of: value) != nil
        }
        for key in broken ? allKeys() : [] {
            if let problem = Identifier.fieldKey.violation(key) {
                throw invalid("invalid field key \(Identifier.shown(key)): \(problem)")
            }
            guard let value = self[key] else { continue }
            if let problem = violation(of: value) {
                throw invalid("field \(quoted(key)): \(problem)")
            }
        }
        for (key, asset) in hasAssets ? assets : [] {
            guard let digest = asset.digest, let size = asset.size else {
                throw invalid(
                    "field \(quoted(key)): \(asset) has no digest and size; its file is uploaded before the record is saved"
                )
            }
            if size < 0 { throw invalid("field \(quoted(key)): asset \(digest) has a negative size, \(size)") }
            if size > Limits.maxAssetBytes {
                throw SyncError(
                    .limitExceeded,
                    "field \(quoted(key)): asset \(digest) holds \(size) bytes, more than \(Limits.maxAssetBytes)",
                    item: .record(recordID))
            }
        }
        let size = estimatedSize
        if size > Limits.maxRecordBytes {
            throw SyncError(
                .limitExceeded,
                "record holds \(size) bytes of field data, more than \(Limits.maxRecordBytes)",
                item: .record(recordID))
        }
        return size
    }

    /// Checks one field value: references stay in the zone, lists are homogeneous and flat.
    private func violation(of value: RecordValue) -> String? {
        switch value {
        case .reference(let reference):
            if reference.recordID.zoneID != recordID.zoneID {
                return "reference to \(reference.recordID) leaves the record's zone"
            }
            if let problem = Identifier.recordName.violation(reference.recordID.recordName) {
                return
                    "invalid record name \(Identifier.shown(reference.recordID.recordName)) of a reference: \(problem)"
            }
        case .location(let location):
            return location.violation
        case .encrypted(.opened(let plaintext)):
            // The server cannot check, index or follow what it cannot read (F129).
            switch plaintext {
            case .reference: return "an encrypted field cannot hold a reference"
            case .asset: return "an encrypted field cannot hold an asset (asset contents are stored apart)"
            case .encrypted: return "an encrypted field cannot hold an encrypted value"
            case .list(let elements):
                if let first = elements.first, case .reference = first {
                    return "an encrypted field cannot hold a list of references"
                }
                if let first = elements.first, case .asset = first {
                    return "an encrypted field cannot hold a list of assets"
                }
                if elements.contains(where: { if case .encrypted = $0 { true } else { false } }) {
                    return "an encrypted field cannot hold encrypted values"
                }
            default: break
            }
            return violation(of: plaintext)
        case .encrypted(.sealed(let sealed)):
            if sealed.keyVersion == 0 { return "a sealed value has key version 0" }
            if sealed.box.count < SealedValue.overhead {
                return
                    "a sealed value holds \(sealed.box.count) bytes, fewer than a nonce and a tag (\(SealedValue.overhead))"
            }
        case .list(let elements):
            guard let first = elements.first else { return nil }
            for element in elements {
                if case .list = element { return "lists must not be nested" }
                if case .encrypted = element { return "a list cannot hold encrypted values; encrypt the whole list" }
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

extension Subscription.ID {
    /// Checks the rules of ``Identifier/subscriptionID``: 1 to 255 bytes of UTF-8 without control
    /// characters.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming this subscription.
    public func validate() throws(SyncError) {
        try Identifier.subscriptionID.validate(rawValue, item: .subscription(self))
    }
}

extension Subscription {
    /// Checks the subscription's ID and, for a zone subscription, the zone ID (F127).
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming this subscription.
    public func validate() throws(SyncError) {
        try subscriptionID.validate()
        if case .recordZone(let zoneID) = kind {
            do throws(SyncError) {
                try zoneID.validate()
            } catch {
                var error = error
                error.item = .subscription(subscriptionID)
                error.message += " (for \(self))"
                throw error
            }
        }
    }
}

extension RequestID {
    /// Checks the rules of ``Identifier/requestID``: 1 to 255 bytes of UTF-8 without control
    /// characters.
    ///
    /// - Throws: ``SyncError`` `invalidArguments`.
    public func validate() throws(SyncError) {
        try Identifier.requestID.validate(rawValue)
    }
}

extension DeviceID {
    /// Checks the rules of ``Identifier/deviceID``: 1 to 255 bytes of UTF-8 without control
    /// characters.
    ///
    /// - Throws: ``SyncError`` `invalidArguments`.
    public func validate() throws(SyncError) {
        try Identifier.deviceID.validate(rawValue)
    }
}
