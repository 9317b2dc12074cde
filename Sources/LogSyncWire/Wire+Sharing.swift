import Foundation
import SyncModel

// The bodies of the sharing operations (`ShareOperations`): share metadata, acceptance and the
// lookup of participants.
extension Wire {
    /// Encodes the request of `fetchShareMetadata`: the URL.
    public static func encode(shareMetadataRequest url: URL, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchShareMetadataRequest()
        message.url = url.absoluteString
        return format.encode(message)
    }

    /// Decodes the request of `fetchShareMetadata`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(shareMetadataRequest bytes: [UInt8], as format: WireFormat) throws(SyncError) -> URL {
        try decodeMessage(bytes, format) { (message: Logsync_Wire_FetchShareMetadataRequest) throws(SyncError) -> URL in
            try url(message.url, "url")
        }
    }

    /// Encodes a `Share/Metadata`.
    public static func encode(_ value: Share.Metadata, as format: WireFormat) -> [UInt8] {
        var metadata = Logsync_Wire_ShareMetadata()
        metadata.share = value.share.record.proto
        if let root = value.hierarchicalRootRecordID { metadata.hierarchicalRootRecordID = root.proto }
        metadata.ownerIdentity = identity(value.ownerIdentity)
        metadata.participantRole = Int64(value.participantRole.rawValue)
        metadata.participantPermission = Int64(value.participantPermission.rawValue)
        metadata.participantStatus = Int64(value.participantStatus.rawValue)
        var message = Logsync_Wire_FetchShareMetadataResponse()
        message.metadata = metadata
        return format.encode(message)
    }

    /// Decodes a `Share/Metadata`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: Share.Metadata.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> Share.Metadata {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchShareMetadataResponse) throws(SyncError) -> Share.Metadata in
            guard message.hasMetadata else { throw SyncError(.invalidArguments, "metadata is missing") }
            let metadata = message.metadata
            return try within("metadata") { () throws(SyncError) -> Share.Metadata in
                guard metadata.hasShare else { throw SyncError(.invalidArguments, "share is missing") }
                guard metadata.hasOwnerIdentity else { throw SyncError(.invalidArguments, "owner_identity is missing") }
                guard let role = Share.Participant.Role(rawValue: Int(truncatingIfNeeded: metadata.participantRole))
                else {
                    throw SyncError(.invalidArguments, "participant_role \(metadata.participantRole) is not a role")
                }
                guard
                    let permission = Share.Participant.Permission(
                        rawValue: Int(truncatingIfNeeded: metadata.participantPermission))
                else {
                    throw SyncError(
                        .invalidArguments,
                        "participant_permission \(metadata.participantPermission) is not a permission")
                }
                guard
                    let status = Share.Participant.AcceptanceStatus(
                        rawValue: Int(truncatingIfNeeded: metadata.participantStatus))
                else {
                    throw SyncError(
                        .invalidArguments, "participant_status \(metadata.participantStatus) is not a status")
                }
                return Share.Metadata(
                    share: try within("share") { () throws(SyncError) in
                        try Share(record: try Record(proto: metadata.share))
                    },
                    hierarchicalRootRecordID: metadata.hasHierarchicalRootRecordID
                        ? try within("hierarchical_root_record_id") { () throws(SyncError) in
                            try Record.ID(proto: metadata.hierarchicalRootRecordID)
                        } : nil,
                    ownerIdentity: identity(metadata.ownerIdentity), participantRole: role,
                    participantPermission: permission,
                    participantStatus: status)
            }
        }
    }

    /// Encodes an `AcceptSharesRequest`.
    public static func encode(_ value: AcceptSharesRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_AcceptSharesRequest()
        message.shareUrls = value.shareURLs.map(\.absoluteString)
        return format.encode(message)
    }

    /// Decodes an `AcceptSharesRequest`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: AcceptSharesRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> AcceptSharesRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_AcceptSharesRequest) throws(SyncError) -> AcceptSharesRequest in
            var urls: [URL] = []
            for (index, text) in message.shareUrls.enumerated() { urls.append(try url(text, "share_urls[\(index)]")) }
            return AcceptSharesRequest(shareURLs: urls)
        }
    }

    /// Encodes an `AcceptSharesResponse`, sorted by URL.
    public static func encode(_ value: AcceptSharesResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_AcceptSharesResponse()
        message.results = value.results.sorted { $0.key.absoluteString < $1.key.absoluteString }.map { url, result in
            var entry = Logsync_Wire_ShareResult()
            entry.url = url.absoluteString
            switch result {
            case .success(let share): entry.share = share.record.proto
            case .failure(let error): entry.error = error.proto
            }
            return entry
        }
        return format.encode(message)
    }

    /// Decodes an `AcceptSharesResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: AcceptSharesResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> AcceptSharesResponse {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_AcceptSharesResponse) throws(SyncError) -> AcceptSharesResponse in
            AcceptSharesResponse(
                results: try ProtoDecoding.keyed(message.results, "results") {
                    entry throws(SyncError) -> (URL, Result<Share, SyncError>) in
                    let url = try url(entry.url, "url")
                    switch entry.outcome {
                    case .share(let record)?:
                        return (
                            url,
                            .success(
                                try within("share") { () throws(SyncError) in
                                    try Share(record: try Record(proto: record))
                                })
                        )
                    case .error(let error)?:
                        return (url, .failure(try resultError(error)))
                    case nil:
                        throw SyncError(.invalidArguments, "has no outcome set")
                    }
                })
        }
    }

    /// Encodes a `FetchShareParticipantsRequest`.
    public static func encode(_ value: FetchShareParticipantsRequest, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchShareParticipantsRequest()
        message.lookupInfos = value.lookupInfos.map(lookupInfo)
        return format.encode(message)
    }

    /// Decodes a `FetchShareParticipantsRequest`. Each lookup info is checked by the server, per
    /// item; a missing part decodes as absent.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchShareParticipantsRequest.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchShareParticipantsRequest {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_FetchShareParticipantsRequest) throws(SyncError) -> FetchShareParticipantsRequest in
            FetchShareParticipantsRequest(lookupInfos: message.lookupInfos.map(lookupInfo))
        }
    }

    /// Encodes a `FetchShareParticipantsResponse`, sorted by e-mail address, then user record name.
    public static func encode(_ value: FetchShareParticipantsResponse, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_FetchShareParticipantsResponse()
        message.results = value.results.sorted {
            ($0.key.emailAddress ?? "", $0.key.userRecordName ?? "") < (
                $1.key.emailAddress ?? "", $1.key.userRecordName ?? ""
            )
        }.map { info, result in
            var entry = Logsync_Wire_ParticipantResult()
            entry.lookupInfo = lookupInfo(info)
            switch result {
            case .success(let participant):
                var wire = Logsync_Wire_Participant()
                wire.userIdentity = identity(participant.userIdentity)
                wire.role = Int64(participant.role.rawValue)
                wire.permission = Int64(participant.permission.rawValue)
                wire.acceptanceStatus = Int64(participant.acceptanceStatus.rawValue)
                entry.participant = wire
            case .failure(let error): entry.error = error.proto
            }
            return entry
        }
        return format.encode(message)
    }

    /// Decodes a `FetchShareParticipantsResponse`.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong.
    public static func decode(
        _: FetchShareParticipantsResponse.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> FetchShareParticipantsResponse {
        typealias Message = Logsync_Wire_FetchShareParticipantsResponse
        return try decodeMessage(bytes, format) {
            (message: Message) throws(SyncError) -> FetchShareParticipantsResponse in
            FetchShareParticipantsResponse(
                results: try ProtoDecoding.keyed(message.results, "results") {
                    entry throws(SyncError) -> (UserIdentity.LookupInfo, Result<Share.Participant, SyncError>) in
                    guard entry.hasLookupInfo else { throw SyncError(.invalidArguments, "lookup_info is missing") }
                    let info = lookupInfo(entry.lookupInfo)
                    switch entry.outcome {
                    case .participant(let wire)?:
                        return (
                            info, .success(try within("participant") { () throws(SyncError) in try participant(wire) })
                        )
                    case .error(let error)?:
                        return (info, .failure(try resultError(error)))
                    case nil:
                        throw SyncError(.invalidArguments, "has no outcome set")
                    }
                })
        }
    }

    private static func participant(_ wire: Logsync_Wire_Participant) throws(SyncError) -> Share.Participant {
        guard wire.hasUserIdentity else { throw SyncError(.invalidArguments, "user_identity is missing") }
        guard let role = Share.Participant.Role(rawValue: Int(truncatingIfNeeded: wire.role)) else {
            throw SyncError(.invalidArguments, "role \(wire.role) is not a role")
        }
        guard let permission = Share.Participant.Permission(rawValue: Int(truncatingIfNeeded: wire.permission)) else {
            throw SyncError(.invalidArguments, "permission \(wire.permission) is not a permission")
        }
        guard
            let status = Share.Participant.AcceptanceStatus(rawValue: Int(truncatingIfNeeded: wire.acceptanceStatus))
        else {
            throw SyncError(.invalidArguments, "acceptance_status \(wire.acceptanceStatus) is not a status")
        }
        return Share.Participant(
            userIdentity: identity(wire.userIdentity), role: role, permission: permission, acceptanceStatus: status)
    }

    private static func lookupInfo(_ value: UserIdentity.LookupInfo) -> Logsync_Wire_LookupInfo {
        var message = Logsync_Wire_LookupInfo()
        message.emailAddress = value.emailAddress ?? ""
        message.userRecordName = value.userRecordName ?? ""
        return message
    }

    private static func lookupInfo(_ message: Logsync_Wire_LookupInfo) -> UserIdentity.LookupInfo {
        UserIdentity.LookupInfo(
            unchecked: message.emailAddress.isEmpty ? nil : message.emailAddress,
            userRecordName: message.userRecordName.isEmpty ? nil : message.userRecordName)
    }

    private static func url(_ text: String, _ field: String) throws(SyncError) -> URL {
        guard !text.isEmpty, let url = URL(string: text) else {
            throw SyncError(.invalidArguments, "\(field) \(text.isEmpty ? "is missing" : "\"\(text)\" is not a URL")")
        }
        return url
    }

    private static func identity(_ value: UserIdentity) -> Logsync_Wire_UserIdentity {
        var message = Logsync_Wire_UserIdentity()
        message.userRecordName = value.userRecordName ?? ""
        message.emailAddress = value.emailAddress ?? ""
        return message
    }

    private static func identity(_ message: Logsync_Wire_UserIdentity) -> UserIdentity {
        UserIdentity(
            userRecordName: message.userRecordName.isEmpty ? nil : message.userRecordName,
            emailAddress: message.emailAddress.isEmpty ? nil : message.emailAddress)
    }
}
