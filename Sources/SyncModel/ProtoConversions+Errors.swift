// Conversions of errors, subscriptions and modify responses to and from their Protocol Buffers
// messages (Proto/model.proto). The rules are in ProtoConversions.swift.

extension SyncError.ItemID: ProtoConvertible {
    package init(proto: Logsync_Model_ItemID) throws(SyncError) {
        switch proto.item {
        case .record(let id)?:
            self = .record(
                try ProtoDecoding.within("ItemID.record") { () throws(SyncError) in try Record.ID(proto: id) })
        case .zone(let id)?: self = .zone(RecordZone.ID(proto: id))
        case .subscription(let id)?: self = .subscription(Subscription.ID(rawValue: id))
        case nil: throw ProtoDecoding.invalid("ItemID", "has no item set")
        }
    }

    package var proto: Logsync_Model_ItemID {
        var message = Logsync_Model_ItemID()
        switch self {
        case .record(let id): message.item = .record(id.proto)
        case .zone(let id): message.item = .zone(id.proto)
        case .subscription(let id): message.item = .subscription(id.rawValue)
        }
        return message
    }
}

extension SyncError: ProtoConvertible {
    /// Decodes an error with its records, partial errors and zone deletion reason.
    ///
    /// `user_did_reset_encrypted_data_key` is derived from the reason; when it is set without a
    /// reason the reason is `encryptedDataReset`, and set with another reason it is invalid.
    package init(proto: Logsync_Model_SyncError) throws(SyncError) {
        guard proto.hasCode else { throw ProtoDecoding.missing("SyncError.code") }
        guard let rawCode = Int(exactly: proto.code) else {
            throw ProtoDecoding.invalid("SyncError.code", "\(proto.code) is out of range")
        }
        func record(_ field: String, _ message: Logsync_Model_Record) throws(SyncError) -> Record {
            try ProtoDecoding.within("SyncError.\(field)") { () throws(SyncError) in try Record(proto: message) }
        }

        let item: ItemID? =
            proto.hasItem
            ? try ProtoDecoding.within("SyncError.item") { () throws(SyncError) in try ItemID(proto: proto.item) }
            : nil

        var partialErrors: [ItemID: SyncError] = [:]
        for (index, entry) in proto.partialErrors.enumerated() {
            let context = "SyncError.partial_errors[\(index)]"
            guard entry.hasItem else { throw ProtoDecoding.missing("\(context).item") }
            guard entry.hasError else { throw ProtoDecoding.missing("\(context).error") }
            let key = try ProtoDecoding.within("\(context).item") { () throws(SyncError) in
                try ItemID(proto: entry.item)
            }
            let error = try ProtoDecoding.within("\(context).error") { () throws(SyncError) in
                try SyncError(proto: entry.error)
            }
            guard partialErrors.updateValue(error, forKey: key) == nil else {
                throw ProtoDecoding.invalid(context, "names \(key) a second time")
            }
        }

        var reason: ZoneDeletionReason?
        switch proto.zoneDeletionReason {
        case .unspecified:
            reason = proto.userDidResetEncryptedDataKey ? .encryptedDataReset : nil
        default:
            reason = try ProtoDecoding.within("SyncError.zone_deletion_reason") { () throws(SyncError) in
                try ZoneDeletionReason(proto: proto.zoneDeletionReason)
            }
            if proto.userDidResetEncryptedDataKey, reason != .encryptedDataReset {
                throw ProtoDecoding.invalid(
                    "SyncError.user_did_reset_encrypted_data_key",
                    "is true but zone_deletion_reason is \(reason.map(String.init(describing:)) ?? "absent")")
            }
        }

        self.init(
            Code(rawValue: rawCode), proto.message, item: item,
            requestID: proto.hasRequestID ? RequestID(rawValue: proto.requestID) : nil,
            retryAfter: proto.hasRetryAfterMicroseconds
                ? ProtoTime.duration(microseconds: proto.retryAfterMicroseconds) : nil,
            partialErrors: partialErrors, zoneDeletionReason: reason,
            cause: proto.hasCause ? proto.cause : nil)
        serverRecord = proto.hasServerRecord ? try record("server_record", proto.serverRecord) : nil
        clientRecord = proto.hasClientRecord ? try record("client_record", proto.clientRecord) : nil
        ancestorRecord = proto.hasAncestorRecord ? try record("ancestor_record", proto.ancestorRecord) : nil
    }

    package var proto: Logsync_Model_SyncError {
        var message = Logsync_Model_SyncError()
        message.code = Int64(code.rawValue)
        message.message = self.message
        if let item { message.item = item.proto }
        if let requestID { message.requestID = requestID.rawValue }
        if let serverRecord { message.serverRecord = serverRecord.proto }
        if let clientRecord { message.clientRecord = clientRecord.proto }
        if let ancestorRecord { message.ancestorRecord = ancestorRecord.proto }
        if let retryAfter { message.retryAfterMicroseconds = ProtoTime.microseconds(retryAfter) }
        message.partialErrors =
            partialErrors
            .map { (key: ProtoOrder.key($0.key), item: $0.key, error: $0.value) }
            .sorted { ProtoOrder.precedes($0.key, $1.key) }
            .map { entry in
                var partial = Logsync_Model_PartialError()
                partial.item = entry.item.proto
                partial.error = entry.error.proto
                return partial
            }
        if let zoneDeletionReason { message.zoneDeletionReason = zoneDeletionReason.proto }
        if let cause { message.cause = cause }
        message.userDidResetEncryptedDataKey = userDidResetEncryptedDataKey
        return message
    }
}

extension Subscription: ProtoConvertible {
    package init(proto: Logsync_Model_Subscription) throws(SyncError) {
        let kind: Kind
        switch proto.kind {
        case .database?: kind = .database
        case .recordZone(let zoneID)?: kind = .recordZone(RecordZone.ID(proto: zoneID))
        case nil: throw ProtoDecoding.invalid("Subscription", "has no kind set")
        }
        self.init(subscriptionID: ID(rawValue: proto.subscriptionID), kind: kind)
    }

    package var proto: Logsync_Model_Subscription {
        var message = Logsync_Model_Subscription()
        message.subscriptionID = subscriptionID.rawValue
        switch kind {
        case .database: message.kind = .database(Logsync_Model_WholeDatabase())
        case .recordZone(let zoneID): message.kind = .recordZone(zoneID.proto)
        }
        return message
    }
}

extension ModifyRecordsResponse: ProtoConvertible {
    /// Decodes the per-record outcomes.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` for a result without a record ID or outcome, or
    ///   a record that has two results of one kind.
    package init(proto: Logsync_Model_ModifyRecordsResponse) throws(SyncError) {
        let saveResults = try ProtoDecoding.keyed(proto.saveResults, "ModifyRecordsResponse.save_results") {
            entry throws(SyncError) -> (Record.ID, Result<Record, SyncError>) in
            let id = try Self.resultID(entry.hasRecordID, entry.recordID, "SaveResult")
            switch entry.outcome {
            case .saved(let record)?:
                return (
                    id,
                    .success(
                        try ProtoDecoding.within("SaveResult.saved") { () throws(SyncError) in
                            try Record(proto: record)
                        })
                )
            case .error(let error)?:
                return (id, .failure(try Self.resultError(error, "SaveResult")))
            case nil:
                throw ProtoDecoding.invalid("SaveResult", "has no outcome set")
            }
        }
        let deleteResults = try ProtoDecoding.keyed(proto.deleteResults, "ModifyRecordsResponse.delete_results") {
            entry throws(SyncError) -> (Record.ID, Result<Void, SyncError>) in
            let id = try Self.resultID(entry.hasRecordID, entry.recordID, "DeleteResult")
            switch entry.outcome {
            case .deleted?:
                return (id, .success(()))
            case .error(let error)?:
                return (id, .failure(try Self.resultError(error, "DeleteResult")))
            case nil:
                throw ProtoDecoding.invalid("DeleteResult", "has no outcome set")
            }
        }
        self.init(saveResults: saveResults, deleteResults: deleteResults)
    }

    private static func resultError(_ error: Logsync_Model_SyncError, _ message: String) throws(SyncError) -> SyncError
    {
        try ProtoDecoding.within("\(message).error") { () throws(SyncError) in try SyncError(proto: error) }
    }

    private static func resultID(
        _ present: Bool, _ id: Logsync_Model_RecordID, _ message: String
    ) throws(SyncError) -> Record.ID {
        guard present else { throw ProtoDecoding.missing("\(message).record_id") }
        return try ProtoDecoding.within("\(message).record_id") { () throws(SyncError) in
            try Record.ID(proto: id)
        }
    }

    /// The outcomes, each list sorted by record ID so that equal responses have equal bytes.
    package var proto: Logsync_Model_ModifyRecordsResponse {
        var message = Logsync_Model_ModifyRecordsResponse()
        message.saveResults = ProtoOrder.sorted(saveResults)
            .map { id, result in
                var entry = Logsync_Model_SaveResult()
                entry.recordID = id.proto
                switch result {
                case .success(let record): entry.saved = record.proto
                case .failure(let error): entry.error = error.proto
                }
                return entry
            }
        message.deleteResults = ProtoOrder.sorted(deleteResults)
            .map { id, result in
                var entry = Logsync_Model_DeleteResult()
                entry.recordID = id.proto
                switch result {
                case .success: entry.deleted = true
                case .failure(let error): entry.error = error.proto
                }
                return entry
            }
        return message
    }
}
