import Foundation

/// The value of a field of ``Record/encryptedValues`` (CloudKit's `CKRecord.encryptedValues`,
/// F129): opened on a device, sealed everywhere else.
///
/// The app only ever sees and sets opened values, through ``Record/encryptedValues``. The engine
/// seals every opened value with its zone's key before the record enters a request, and opens
/// sealed values after a fetch, so a server, its log and its backups hold only ``sealed(_:)``
/// values; a server refuses a record that holds an opened one. See `Docs/Encryption.md`.
public indirect enum EncryptedValue: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The plaintext value, as the app set it or the engine opened it.
    case opened(RecordValue)
    /// The value sealed under a version of its zone's key.
    case sealed(SealedValue)

    /// The plaintext, or `nil` while sealed.
    public var plaintext: RecordValue? {
        if case .opened(let value) = self { value } else { nil }
    }

    /// `opened(…)` or `sealed(version N, M bytes)`; never the plaintext, so logs do not leak it.
    public var description: String {
        switch self {
        case .opened(let value): "opened(\(value.kindName))"
        case .sealed(let sealed): "sealed(\(sealed))"
        }
    }
}

/// A field value sealed with ChaChaPoly under one version of its zone's key: the nonce (12
/// bytes), the ciphertext and the tag (16 bytes), bound to the record's zone name, record name
/// and field key, so that a sealed value moved to another field or record does not open.
public struct SealedValue: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The zone key's version it was sealed under.
    public var keyVersion: UInt32
    /// The nonce, ciphertext and tag.
    public var box: Data

    /// The bytes sealing adds to a value: nonce and tag.
    public static let overhead = 28

    /// Creates a sealed value from its parts.
    public init(keyVersion: UInt32, box: Data) {
        self.keyVersion = keyVersion
        self.box = box
    }

    /// `version N, M bytes`.
    public var description: String { "key version \(keyVersion), \(box.count) bytes" }
}

extension Record {
    /// The record's encrypted fields, as CloudKit's `encryptedValues`: set plaintext values here
    /// and the engine seals them with the zone's key before they leave the device (F129).
    ///
    /// ```swift
    /// note.encryptedValues["diagnosis"] = "private"
    /// let text = note.encryptedValues["diagnosis"]   // .string("private") on every device with the key
    /// ```
    ///
    /// Encrypted fields share the record's keys with plain ones (setting one replaces the other)
    /// and mark the key changed. They may hold any value but a reference, an asset or a list of
    /// either: the server cannot follow what it cannot read (``Record/validate()`` refuses them).
    /// Reading a key whose value is plain, or still sealed, gives `nil`.
    public var encryptedValues: EncryptedValues {
        get { EncryptedValues(record: self) }
        set { self = newValue.record }
    }

    /// A view of a record's encrypted fields (``Record/encryptedValues``).
    public struct EncryptedValues: Sendable {
        fileprivate var record: Record

        /// The opened value of an encrypted field, or `nil`.
        public subscript(key: String) -> RecordValue? {
            get {
                if case .encrypted(let value)? = record[key] { value.plaintext } else { nil }
            }
            set { record[key] = newValue.map { .encrypted(.opened($0)) } }
        }

        /// The keys of the record's encrypted fields, opened or sealed, sorted.
        public func allKeys() -> [String] {
            record.allKeys().filter { if case .encrypted? = record[$0] { true } else { false } }
        }
    }

    /// Whether any field is encrypted, opened or sealed.
    package var hasEncryptedValues: Bool {
        fields.values.contains { if case .encrypted = $0 { true } else { false } }
    }

    /// The keys of fields holding an opened encrypted value: what a server must never receive.
    package var openedEncryptedKeys: [String] {
        allKeys().filter { if case .encrypted(.opened)? = self[$0] { true } else { false } }
    }

    /// The record with each encrypted field replaced by `transform`'s value, keeping the change
    /// state; the first error thrown stops it.
    package func mappingEncryptedValues(
        _ transform: (String, EncryptedValue) throws(SyncError) -> EncryptedValue
    ) throws(SyncError) -> Record {
        var copy = self
        for key in allKeys() {
            guard case .encrypted(let value)? = self[key] else { continue }
            copy.setValueKeepingChangeState(.encrypted(try transform(key, value)), forKey: key)
        }
        return copy
    }
}
