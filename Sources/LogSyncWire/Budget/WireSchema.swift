import Foundation
import SwiftProtobuf

/// The messages of the wire format as a request body's measurement needs them: for each message,
/// which of its fields hold messages, which are repeated, and their names.
///
/// Read from the descriptors protoc writes for `wire.proto` and `model.proto`
/// (`Generated/wire.descriptors.swift`, made by `Tools/generate-protos.sh` with the generated
/// code), so it always agrees with the messages SwiftProtobuf decodes.
package struct WireSchema: Sendable {
    /// How a field is encoded, as far as counting goes.
    package enum Kind: Sendable, Equatable {
        /// A message (map entries included), the index of its ``Message`` in ``messages``.
        case message(Int)
        /// A string or bytes field.
        case lengthDelimited
        /// A number, a bool or an enum value: varints.
        case varint
        /// A `fixed32`, `sfixed32` or `float`.
        case fixed32
        /// A `fixed64`, `sfixed64` or `double`.
        case fixed64
    }

    package struct Field: Sendable {
        package var name: String
        package var jsonName: String
        package var kind: Kind
        package var isRepeated: Bool
    }

    package struct Message: Sendable {
        /// The full name, such as `logsync.wire.ModifyRecordsRequest`.
        package var name: String
        /// The fields by number; `nil` where there is none.
        package var fields: [Field?]

        package func field(_ number: Int) -> Field? {
            number < fields.count ? fields[number] : nil
        }

        /// The field named `name` (its `.proto` or its JSON name).
        package func field(named name: String) -> (number: Int, field: Field)? {
            for (number, field) in fields.enumerated() {
                if let field, field.name == name || field.jsonName == name { return (number, field) }
            }
            return nil
        }
    }

    package var messages: [Message]
    private var indexByName: [String: Int]

    /// The message named `name` (a full name, without a leading dot).
    package func message(named name: String) -> Message? {
        indexByName[name].map { messages[$0] }
    }

    package func index(of name: String) -> Int? {
        indexByName[name]
    }

    /// The schema of the wire format.
    package static let wire: WireSchema = {
        guard let bytes = Data(base64Encoded: descriptorSetBase64, options: .ignoreUnknownCharacters) else {
            preconditionFailure("Generated/wire.descriptors.swift does not hold base64; run Tools/generate-protos.sh")
        }
        do {
            return try WireSchema(Google_Protobuf_FileDescriptorSet(serializedBytes: bytes))
        } catch {
            preconditionFailure(
                "Generated/wire.descriptors.swift does not hold a FileDescriptorSet (\(error)); run Tools/generate-protos.sh"
            )
        }
    }()

    /// Builds the schema of every message of `set`, nested ones (map entries) included.
    init(_ set: Google_Protobuf_FileDescriptorSet) {
        var described: [(name: String, descriptor: Google_Protobuf_DescriptorProto)] = []
        func collect(_ descriptor: Google_Protobuf_DescriptorProto, prefix: String) {
            let name = prefix + "." + descriptor.name
            described.append((name, descriptor))
            for nested in descriptor.nestedType { collect(nested, prefix: name) }
        }
        for file in set.file {
            for message in file.messageType { collect(message, prefix: file.package) }
        }
        indexByName = Dictionary(uniqueKeysWithValues: described.enumerated().map { ($1.name, $0) })
        let indexByName = indexByName
        messages = described.map { name, descriptor in
            let count = (descriptor.field.map { Int($0.number) }.max() ?? 0) + 1
            var fields = [Field?](repeating: nil, count: count)
            for field in descriptor.field {
                let kind: Kind
                switch field.type {
                case .message, .group:
                    // Type names are fully qualified, with a leading dot.
                    guard let index = indexByName[String(field.typeName.drop { $0 == "." })] else {
                        preconditionFailure("the wire schema names an unknown message \(field.typeName)")
                    }
                    kind = .message(index)
                case .string, .bytes: kind = .lengthDelimited
                case .fixed32, .sfixed32, .float: kind = .fixed32
                case .fixed64, .sfixed64, .double: kind = .fixed64
                default: kind = .varint
                }
                fields[Int(field.number)] = Field(
                    name: field.name, jsonName: field.jsonName, kind: kind, isRepeated: field.label == .repeated)
            }
            return Message(name: name, fields: fields)
        }
    }
}
