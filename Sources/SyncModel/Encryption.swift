import Crypto
import Foundation
import LogSyncPlatform

// End-to-end encryption of record fields (F129): the keys and the sealing. Docs/Encryption.md
// gives the design and its threat model.

/// A device's X25519 public key as the server keeps it, so that zone keys can be wrapped for the
/// device.
public struct DevicePublicKey: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The key's 32 bytes.
    public let rawRepresentation: Data
    /// The user whose device holds the key, as the server names them; `nil` in a registration.
    public var userRecordName: String?

    /// Creates a public key from its 32 bytes.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when the bytes are not an X25519 public key.
    public init(rawRepresentation: Data, userRecordName: String? = nil) throws(SyncError) {
        guard rawRepresentation.count == 32 else {
            throw SyncError(.invalidArguments, "a device public key has 32 bytes, not \(rawRepresentation.count)")
        }
        self.rawRepresentation = rawRepresentation
        self.userRecordName = userRecordName
    }

    /// The key's ID: the hex of the first 16 bytes of its SHA-256.
    public var keyID: String { Self.keyID(of: rawRepresentation) }

    static func keyID(of raw: Data) -> String {
        SHA256.hash(data: raw).prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// `device key <id>` and its user, if known.
    public var description: String {
        "device key \(keyID)" + (userRecordName.map { " of \(quoted($0))" } ?? "")
    }
}

/// A device's key pair: its private key never leaves the device; its public key is registered
/// with the server (``ZoneKeyDirectory/registerDeviceKey(_:)``).
public struct DeviceKeyPair: Sendable {
    let privateKey: Curve25519.KeyAgreement.PrivateKey

    /// A new random key pair.
    public init() {
        privateKey = Curve25519.KeyAgreement.PrivateKey()
    }

    /// The key pair whose private key has these 32 bytes.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when the bytes are not an X25519 private key.
    public init(privateKeyBytes: Data) throws(SyncError) {
        do {
            privateKey = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKeyBytes)
        } catch {
            throw SyncError(.invalidArguments, "a device private key has 32 bytes, not \(privateKeyBytes.count)")
        }
    }

    /// The private key's 32 bytes, to keep on the device.
    public var privateKeyBytes: Data { privateKey.rawRepresentation }

    /// The public key, to register with the server.
    public var publicKey: DevicePublicKey {
        // 32 bytes by construction.
        try! DevicePublicKey(rawRepresentation: privateKey.publicKey.rawRepresentation)
    }

    /// Loads the key pair kept in `file`, or makes one and keeps it there (readable by its owner
    /// only), so that a device keeps its key across launches.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the file when it holds something else
    ///   than a private key; `internalError` when it cannot be read or written.
    public static func loadOrCreate(at file: URL) throws(SyncError) -> DeviceKeyPair {
        let manager = FileManager.default
        if manager.fileExists(atPath: file.path) {
            let bytes: Data
            do { bytes = try Data(contentsOf: file) } catch {
                throw SyncError(.internalError, "cannot read the device key \(quoted(file.path)): \(error)")
            }
            do { return try DeviceKeyPair(privateKeyBytes: bytes) } catch {
                throw SyncError(
                    .invalidArguments,
                    "the device key \(quoted(file.path)) holds \(bytes.count) bytes, not a 32-byte private key")
            }
        }
        let pair = DeviceKeyPair()
        try writePrivateFile(pair.privateKeyBytes, to: file, what: "the device key")
        return pair
    }

    /// Opens a zone key wrapped for this device.
    ///
    /// - Throws: ``SyncError`` `decryptionFailed` naming the zone and version when the key was
    ///   wrapped for another device or its bytes were changed.
    public func unwrap(_ wrapped: WrappedZoneKey) throws(SyncError) -> ZoneKey {
        func failure(_ why: String) -> SyncError {
            SyncError(
                .decryptionFailed,
                "the wrapped key of \(wrapped.zoneID), version \(wrapped.version), does not open: \(why)",
                item: .zone(wrapped.zoneID))
        }
        let myID = publicKey.keyID
        guard wrapped.recipientKeyID == myID else {
            throw failure("it is wrapped for device key \(wrapped.recipientKeyID), not this device's \(myID)")
        }
        guard wrapped.wrapped.count == WrappedZoneKey.wrappedSize else {
            throw failure("it holds \(wrapped.wrapped.count) bytes, not \(WrappedZoneKey.wrappedSize)")
        }
        do {
            let ephemeral = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: wrapped.wrapped.prefix(32))
            let secret = try privateKey.sharedSecretFromKeyAgreement(with: ephemeral)
            let wrapping = secret.hkdfDerivedSymmetricKey(
                using: SHA256.self, salt: wrapped.wrapped.prefix(32),
                sharedInfo: WrappedZoneKey.info(
                    zoneName: wrapped.zoneID.zoneName, version: wrapped.version, recipient: myID),
                outputByteCount: 32)
            let box = try ChaChaPoly.SealedBox(combined: wrapped.wrapped.dropFirst(32))
            let key = ZoneKey(
                zoneID: wrapped.zoneID, version: wrapped.version,
                key: SymmetricKey(data: try ChaChaPoly.open(box, using: wrapping)))
            guard Data(key.check) == wrapped.check else { throw failure("its check does not match the key inside") }
            return key
        } catch let error as SyncError {
            throw error
        } catch {
            throw failure("authentication failed (wrapped for another key, or changed)")
        }
    }
}

/// One version of a zone's symmetric key (256 bits): the key that seals the zone's encrypted
/// fields. Made by the device that first seals a value in the zone (or rotates it), and kept by
/// the server only wrapped for devices (``WrappedZoneKey``).
public struct ZoneKey: Sendable, Hashable, CustomStringConvertible {
    /// The zone, as this device names it.
    public let zoneID: RecordZone.ID
    /// The version, from 1; rotation makes the next.
    public let version: UInt32
    let key: SymmetricKey

    init(zoneID: RecordZone.ID, version: UInt32, key: SymmetricKey) {
        self.zoneID = zoneID
        self.version = version
        self.key = key
    }

    /// A new random key.
    public static func generate(zoneID: RecordZone.ID, version: UInt32) -> ZoneKey {
        ZoneKey(zoneID: zoneID, version: version, key: SymmetricKey(size: .bits256))
    }

    /// 8 bytes derived from the key, the same in every wrap of this version: lets the server
    /// refuse a second, different key of the same version without learning the key.
    public var check: [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Data("logsync zone key check".utf8), using: key).prefix(8))
    }

    /// `zone key <zone> version N` (never the key).
    public var description: String { "zone key of \(zoneID), version \(version)" }

    public static func == (lhs: ZoneKey, rhs: ZoneKey) -> Bool {
        lhs.zoneID == rhs.zoneID && lhs.version == rhs.version && lhs.check == rhs.check
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(zoneID)
        hasher.combine(version)
    }

    /// The key wrapped for one device: an ephemeral X25519 agreement with the device's public
    /// key, HKDF-SHA256, ChaChaPoly.
    public func wrapped(for recipient: DevicePublicKey) -> WrappedZoneKey {
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        // The recipient's key was checked to be 32 bytes; X25519 accepts any 32 bytes.
        let theirs = try! Curve25519.KeyAgreement.PublicKey(rawRepresentation: recipient.rawRepresentation)
        let secret = try! ephemeral.sharedSecretFromKeyAgreement(with: theirs)
        let salt = ephemeral.publicKey.rawRepresentation
        let wrapping = secret.hkdfDerivedSymmetricKey(
            using: SHA256.self, salt: salt,
            sharedInfo: WrappedZoneKey.info(zoneName: zoneID.zoneName, version: version, recipient: recipient.keyID),
            outputByteCount: 32)
        let box = try! ChaChaPoly.seal(key.withUnsafeBytes { Data($0) }, using: wrapping)
        return WrappedZoneKey(
            zoneID: zoneID, version: version, recipientKeyID: recipient.keyID, check: Data(check),
            wrapped: salt + box.combined)
    }

    /// Seals one field's plaintext, bound to the record's zone name, record name and field key.
    public func seal(_ value: RecordValue, recordID: Record.ID, key field: String) -> SealedValue {
        let plaintext = ProtoWire.serialize(value.proto)
        let box = try! ChaChaPoly.seal(
            plaintext, using: key, authenticating: Self.binding(recordID: recordID, field: field, version: version))
        return SealedValue(keyVersion: version, box: box.combined)
    }

    /// Opens one field's sealed value.
    ///
    /// - Throws: ``SyncError`` `decryptionFailed` naming the record and field when the value was
    ///   sealed under another key or for another field, or was changed.
    public func open(_ sealed: SealedValue, recordID: Record.ID, key field: String) throws(SyncError) -> RecordValue {
        func failure(_ why: String) -> SyncError {
            SyncError(
                .decryptionFailed, "encrypted field \(quoted(field)) of \(recordID) does not open: \(why)",
                item: .record(recordID))
        }
        guard sealed.keyVersion == version else {
            throw failure("it is sealed under key version \(sealed.keyVersion), not \(version)")
        }
        let plaintext: Data
        do {
            let box = try ChaChaPoly.SealedBox(combined: sealed.box)
            plaintext = try ChaChaPoly.open(
                box, using: key, authenticating: Self.binding(recordID: recordID, field: field, version: version))
        } catch {
            throw failure(
                "authentication failed (the ciphertext was changed, or sealed for another key, record or field)")
        }
        do {
            let value = try RecordValue(proto: Logsync_Model_RecordValue(serializedBytes: plaintext))
            if case .encrypted = value { throw failure("it holds an encrypted value") }
            return value
        } catch let error as SyncError {
            throw error
        } catch {
            throw failure("its plaintext is not a record value")
        }
    }

    static func binding(recordID: Record.ID, field: String, version: UInt32) -> Data {
        var bytes = Data("logsync field v1".utf8)
        for part in [recordID.zoneID.zoneName, recordID.recordName, field] {
            bytes.append(contentsOf: withUnsafeBytes(of: UInt32(part.utf8.count).bigEndian, Array.init))
            bytes.append(contentsOf: part.utf8)
        }
        bytes.append(contentsOf: withUnsafeBytes(of: version.bigEndian, Array.init))
        return bytes
    }
}

/// One version of a zone's key, wrapped for one device (``ZoneKey/wrapped(for:)``), as the server
/// keeps it.
public struct WrappedZoneKey: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Which wrap this is: zone, version and recipient.
    public struct ID: Sendable, Hashable, Codable, CustomStringConvertible {
        public var zoneID: RecordZone.ID
        public var version: UInt32
        public var recipientKeyID: String

        public init(zoneID: RecordZone.ID, version: UInt32, recipientKeyID: String) {
            self.zoneID = zoneID
            self.version = version
            self.recipientKeyID = recipientKeyID
        }

        public var description: String { "key version \(version) of \(zoneID) for device key \(recipientKeyID)" }
    }

    /// The zone, as the device that sends or receives it names it.
    public var zoneID: RecordZone.ID
    /// The key's version, from 1.
    public var version: UInt32
    /// The ``DevicePublicKey/keyID`` of the device it is wrapped for.
    public var recipientKeyID: String
    /// ``ZoneKey/check``.
    public var check: Data
    /// The ephemeral public key (32 bytes), then the ChaChaPoly nonce, the sealed key and the tag.
    public var wrapped: Data

    /// The size of ``wrapped``: 32 + 12 + 32 + 16.
    public static let wrappedSize = 92

    /// The highest version a key may have, one below `UInt32.max`, so that a device holding any
    /// valid version can always name the next.
    public static let maxVersion: UInt32 = .max - 1

    public init(zoneID: RecordZone.ID, version: UInt32, recipientKeyID: String, check: Data, wrapped: Data) {
        self.zoneID = zoneID
        self.version = version
        self.recipientKeyID = recipientKeyID
        self.check = check
        self.wrapped = wrapped
    }

    public var id: ID { ID(zoneID: zoneID, version: version, recipientKeyID: recipientKeyID) }

    public var description: String { "wrapped \(id)" }

    /// Checks the shape of the wrap: the zone ID, a version from 1, a key ID of 32 hex digits, an
    /// 8-byte check and 92 wrapped bytes.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` naming the zone and what is wrong.
    public func validate() throws(SyncError) {
        try zoneID.validate()
        func invalid(_ why: String) -> SyncError {
            SyncError(.invalidArguments, "\(self): \(why)", item: .zone(zoneID))
        }
        guard version >= 1 else { throw invalid("a key version starts at 1") }
        guard version <= Self.maxVersion else { throw invalid("a key version is at most \(Self.maxVersion)") }
        guard recipientKeyID.utf8.count == 32,
            recipientKeyID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else {
            throw invalid("the recipient key ID is not 32 lowercase hex digits")
        }
        guard check.count == 8 else { throw invalid("the check holds \(check.count) bytes, not 8") }
        guard wrapped.count == Self.wrappedSize else {
            throw invalid("the wrapped key holds \(wrapped.count) bytes, not \(Self.wrappedSize)")
        }
    }

    static func info(zoneName: String, version: UInt32, recipient: String) -> Data {
        var bytes = Data("logsync zone key v1".utf8)
        bytes.append(contentsOf: withUnsafeBytes(of: UInt32(zoneName.utf8.count).bigEndian, Array.init))
        bytes.append(contentsOf: zoneName.utf8)
        bytes.append(contentsOf: withUnsafeBytes(of: version.bigEndian, Array.init))
        bytes.append(contentsOf: recipient.utf8)
        return bytes
    }
}

// MARK: Protobuf

extension DevicePublicKey {
    /// Decodes a device public key.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` when the key is not 32 bytes.
    package init(proto: Logsync_Model_DevicePublicKey) throws(SyncError) {
        try self.init(
            rawRepresentation: proto.raw, userRecordName: proto.userRecordName.isEmpty ? nil : proto.userRecordName)
    }

    package var proto: Logsync_Model_DevicePublicKey {
        var message = Logsync_Model_DevicePublicKey()
        message.raw = rawRepresentation
        message.userRecordName = userRecordName ?? ""
        return message
    }
}

extension WrappedZoneKey {
    /// Decodes a wrap; its shape is checked by ``validate()``, not here.
    ///
    /// - Throws: ``SyncError`` `invalidArguments` without a zone ID.
    package init(proto: Logsync_Model_WrappedZoneKey) throws(SyncError) {
        guard proto.hasZoneID else { throw ProtoDecoding.invalid("WrappedZoneKey", "has no zone_id") }
        self.init(
            zoneID: RecordZone.ID(proto: proto.zoneID), version: proto.version, recipientKeyID: proto.recipientKeyID,
            check: proto.check, wrapped: proto.wrapped)
    }

    package var proto: Logsync_Model_WrappedZoneKey {
        var message = Logsync_Model_WrappedZoneKey()
        message.zoneID = zoneID.proto
        message.version = version
        message.recipientKeyID = recipientKeyID
        message.check = check
        message.wrapped = wrapped
        return message
    }
}
