import Foundation
import SwiftProtobuf
import SyncModel

/// How a body is encoded: binary Protocol Buffers (the default) or the Protocol Buffers JSON
/// mapping of the same messages, for people and tools such as curl and jq.
///
/// ```swift
/// let format = WireFormat(contentType: "application/json") ?? .protobuf
/// let bytes = format.encode(request.wire)
/// ```
public enum WireFormat: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `application/x-protobuf`: compact, the format of every LogSync client.
    case protobuf
    /// `application/json`: the Protocol Buffers JSON mapping of the same messages.
    case json

    /// The media type sent in `Content-Type` and `Accept`.
    public var mediaType: String {
        switch self {
        case .protobuf: "application/x-protobuf"
        case .json: "application/json"
        }
    }

    /// The media type, such as `application/x-protobuf`.
    public var description: String { mediaType }

    /// The format of a `Content-Type` header's value, ignoring parameters and case; `nil` for a
    /// media type that is neither.
    public init?(contentType: String) {
        let mediaType =
            contentType.split(separator: ";", maxSplits: 1).first
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        switch mediaType {
        case "application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf": self = .protobuf
        case "application/json": self = .json
        default: return nil
        }
    }

    /// The format to answer in, from an `Accept` header: JSON when the client lists
    /// `application/json` (and not Protocol Buffers before it), Protocol Buffers otherwise.
    public static func forResponse(accept: String?) -> WireFormat {
        guard let accept else { return .protobuf }
        for item in accept.split(separator: ",") {
            if let format = WireFormat(contentType: String(item)) { return format }
        }
        return .protobuf
    }

    /// Encodes a message. Binary encoding writes map entries in a deterministic order.
    public func encode(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        switch self {
        case .protobuf: ProtoWire.serialize(message)
        case .json: ProtoWire.serializeJSON(message)
        }
    }

    /// Decodes a message.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the message, the format, the body's size
    ///   and the decoder's reason (truncated, malformed, unknown JSON field …).
    public func decode<Message: SwiftProtobuf.Message>(
        _ type: Message.Type, from bytes: [UInt8]
    ) throws(SyncError) -> Message {
        switch self {
        case .protobuf:
            return try ProtoWire.decode(type, from: bytes)
        case .json:
            do {
                return try Message(jsonUTF8Bytes: bytes)
            } catch {
                throw SyncError(
                    .invalidArguments,
                    "cannot decode \(Message.protoMessageName) from \(bytes.count) bytes of JSON: \(error)")
            }
        }
    }
}
