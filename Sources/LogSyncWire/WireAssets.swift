import Foundation
import SyncModel

/// How much of an asset's content a server holds for an upload: the answer of the upload-status
/// route and of each uploaded piece (Docs/Protocol.md, "Assets").
///
/// ```swift
/// let status = try Wire.decode(AssetUploadStatus.self, from: body, as: .protobuf)
/// if !status.stored { resume(from: status.received) }
/// ```
public struct AssetUploadStatus: Sendable, Hashable, CustomStringConvertible {
    /// The bytes the server holds: where the next piece starts (the size once stored).
    public var received: Int64
    /// Whether the content is stored, whole and checked against its digest.
    public var stored: Bool
    /// The content's size, as announced by the upload.
    public var size: Int64

    /// A status.
    ///
    /// - Parameters:
    ///   - received: The bytes the server holds.
    ///   - stored: Whether the content is stored.
    ///   - size: The content's size.
    public init(received: Int64, stored: Bool, size: Int64) {
        self.received = received
        self.stored = stored
        self.size = size
    }

    /// `stored`, or `received N of M bytes`, for messages and logs.
    public var description: String { stored ? "stored (\(size) bytes)" : "received \(received) of \(size) bytes" }
}

extension Wire {
    /// Encodes an ``AssetUploadStatus``.
    public static func encode(_ value: AssetUploadStatus, as format: WireFormat) -> [UInt8] {
        var message = Logsync_Wire_AssetUploadStatus()
        message.received = value.received
        message.stored = value.stored
        message.size = value.size
        return format.encode(message)
    }

    /// Decodes an ``AssetUploadStatus``.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming what is wrong: a negative count, or more
    ///   bytes received than the size.
    public static func decode(
        _: AssetUploadStatus.Type, from bytes: [UInt8], as format: WireFormat
    ) throws(SyncError) -> AssetUploadStatus {
        try decodeMessage(bytes, format) {
            (message: Logsync_Wire_AssetUploadStatus) throws(SyncError) -> AssetUploadStatus in
            guard message.size >= 0, message.received >= 0, message.received <= message.size else {
                throw SyncError(
                    .invalidArguments, "received \(message.received) is not within the asset's size, \(message.size)")
            }
            return AssetUploadStatus(received: message.received, stored: message.stored, size: message.size)
        }
    }
}

extension WireProtocol {
    /// The query parameters of the asset routes (Docs/Protocol.md, "Assets").
    public enum AssetParameter {
        /// The name of the zone whose records reference the asset (required).
        public static let zone = "zone"
        /// The zone owner's record name; absent: the current user (`__defaultOwner__`).
        public static let owner = "owner"
        /// The content's size in bytes: required for uploads and their status; on a download, the
        /// size the client expects, checked by the server.
        public static let size = "size"
        /// On an uploaded piece: the byte of the content at which the body starts.
        public static let offset = "offset"
    }

    /// The path of an asset's content, such as `/v1/databases/private/assets/<64 hex digits>`:
    /// `PUT` uploads a piece of it, `GET` downloads it.
    public static func assetPath(_ digest: AssetDigest, scope: DatabaseScope) -> String {
        "/\(versionPath)/databases/\(scopeName(scope))/assets/\(digest.hex)"
    }

    /// The path of an upload's status: how much of the content the server holds
    /// (`GET`, answered with ``AssetUploadStatus``).
    public static func assetUploadPath(_ digest: AssetDigest, scope: DatabaseScope) -> String {
        assetPath(digest, scope: scope) + "/upload"
    }

    /// The query of an asset request, percent-encoded: the zone (and its owner when it is not
    /// the current user), then the size and the offset when given.
    ///
    /// ```swift
    /// WireProtocol.assetQuery(zoneID: RecordZone.ID(zoneName: "Notes"), size: 20, offset: 0)
    /// // "zone=Notes&size=20&offset=0"
    /// ```
    public static func assetQuery(zoneID: RecordZone.ID, size: Int64? = nil, offset: Int64? = nil) -> String {
        var items = ["\(AssetParameter.zone)=\(percentEncoded(zoneID.zoneName))"]
        if zoneID.ownerName != RecordZone.ID.defaultOwnerName {
            items.append("\(AssetParameter.owner)=\(percentEncoded(zoneID.ownerName))")
        }
        if let size { items.append("\(AssetParameter.size)=\(size)") }
        if let offset { items.append("\(AssetParameter.offset)=\(offset)") }
        return items.joined(separator: "&")
    }

    /// `text` with every byte but the URL's unreserved characters (letters, digits, `-._~`)
    /// percent-encoded, so that it stands as one query value.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF".unicodeScalars)
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(digits[Int(byte >> 4)])
                encoded.unicodeScalars.append(digits[Int(byte & 15)])
            }
        }
        return encoded
    }
}

extension Wire {
    /// An operation group as the value of ``WireProtocol/operationGroupHeader``: its
    /// `logsync.model.OperationGroup` message, base64-encoded.
    public static func encodeHeader(_ group: OperationGroup) -> String {
        Data(group.protoBytes()).base64EncodedString()
    }

    /// Decodes the value of ``WireProtocol/operationGroupHeader``.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the header, for a value that is not
    ///   base64 or not a group.
    public static func decodeHeader(_: OperationGroup.Type, from value: String) throws(SyncError) -> OperationGroup {
        guard let bytes = Data(base64Encoded: value) else {
            throw SyncError(.invalidArguments, "the \(WireProtocol.operationGroupHeader) header is not base64")
        }
        return try within(WireProtocol.operationGroupHeader) { () throws(SyncError) in
            try OperationGroup(protoBytes: Array(bytes))
        }
    }
}
