import LogStore
import SwiftProtobuf
import SyncModel

// Model messages as the payloads of log entries, for the engine's device log and the server's
// logs: an entry that does not decode is a corrupt entry of its log, named by kind and offset.

extension ProtoWire {
    /// Parses the payload of a log entry as `type`.
    ///
    /// - Throws: `LogStoreError` `.corruptEntry` naming the entry's kind, `name` and offset.
    package static func decode<Message: SwiftProtobuf.Message>(
        _ type: Message.Type, payloadOf entry: LogEntry, _ name: String
    ) throws(LogStoreError) -> Message {
        try converting(entry, name) { () throws(SyncError) in try decode(type, from: entry.payload) }
    }

    /// Parses the payload of a log entry as `type` and converts the message to a value, any
    /// error becoming `LogStoreError` `.corruptEntry` naming the entry's kind, `name` and offset.
    package static func decode<Message: SwiftProtobuf.Message, T>(
        _ type: Message.Type, payloadOf entry: LogEntry, _ name: String,
        _ convert: (Message) throws(SyncError) -> T
    ) throws(LogStoreError) -> T {
        let message = try decode(type, payloadOf: entry, name)
        return try converting(entry, name) { () throws(SyncError) in try convert(message) }
    }

    /// Runs the conversion of an entry's decoded message to a value, turning its error into
    /// `LogStoreError` `.corruptEntry` naming the entry's kind, `name` and offset.
    package static func converting<T>(
        _ entry: LogEntry, _ name: String, _ body: () throws(SyncError) -> T
    ) throws(LogStoreError) -> T {
        do {
            return try body()
        } catch {
            throw LogStoreError(
                .corruptEntry, "\(name) (kind \(entry.kind)) payload: \(error.message)", offset: entry.offset)
        }
    }
}
