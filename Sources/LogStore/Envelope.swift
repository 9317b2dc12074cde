/// The byte layout of a stored entry (format version 1), all integers big-endian:
///
/// ```
/// 0       u8   format version (1)
/// 1       u8   flags (0; reserved)
/// 2..<4   u16  kind
/// 4..<12  i64  time, microseconds since 1970
/// 12..<16 u32  payload length n
/// 16..<16+n    payload
/// 16+n..<20+n  u32 CRC-32C of the 8-byte big-endian offset followed by bytes 0..<16+n
/// ```
///
/// The checksum covers the offset, so an entry copied under the wrong key is detected too.
/// See Docs/LogFormat.md.
enum Envelope {
    static let currentVersion: UInt8 = 1
    static let headerSize = 16
    static let trailerSize = 4
    static let overhead = headerSize + trailerSize
    /// Payloads are limited to what a u32 length can describe, minus the envelope.
    static let maxPayloadSize = Int(UInt32.max) - overhead

    /// Writes the envelope of `entry` at `offset` into `buffer`, which holds exactly
    /// `overhead + payload.count` bytes.
    static func encode(
        offset: LogOffset, kind: EntryKind, time: EntryTime, payload: [UInt8],
        into buffer: UnsafeMutableRawBufferPointer
    ) {
        let base = buffer.baseAddress!
        base.storeBytes(of: currentVersion, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 1, as: UInt8.self)
        base.storeBytes(of: kind.rawValue.bigEndian, toByteOffset: 2, as: UInt16.self)
        base.storeBytes(of: time.microsecondsSince1970.bigEndian, toByteOffset: 4, as: Int64.self)
        base.storeBytes(of: UInt32(payload.count).bigEndian, toByteOffset: 12, as: UInt32.self)
        payload.withUnsafeBytes { source in
            if source.count > 0 {
                (base + headerSize).copyMemory(from: source.baseAddress!, byteCount: source.count)
            }
        }
        let covered = headerSize + payload.count
        var crc = withUnsafeBytes(of: offset.key) { CRC32C.update(0, $0) }
        crc = CRC32C.update(crc, UnsafeRawBufferPointer(start: base, count: covered))
        base.storeBytes(of: crc.bigEndian, toByteOffset: covered, as: UInt32.self)
    }

    /// Encodes into a new array (for tests and tools that write raw bytes).
    static func encode(offset: LogOffset, kind: EntryKind, time: EntryTime, payload: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: overhead + payload.count) { buffer, count in
            encode(
                offset: offset, kind: kind, time: time, payload: payload,
                into: UnsafeMutableRawBufferPointer(buffer))
            count = overhead + payload.count
        }
    }

    /// Reads and checks the entry stored at `offset`.
    ///
    /// - Throws: `LogStoreError` `.unknownFormatVersion` or `.corruptEntry`, naming the offset.
    static func decode(offset: LogOffset, bytes: UnsafeRawBufferPointer) throws(LogStoreError) -> LogEntry {
        let header = try check(offset: offset, bytes: bytes)
        let payload = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[headerSize..<(headerSize + header.length)]))
        return LogEntry(offset: offset, kind: header.kind, time: header.time, payload: payload)
    }

    struct Header {
        var kind: EntryKind
        var time: EntryTime
        var length: Int
    }

    /// Verifies version, length and checksum without copying the payload.
    static func check(offset: LogOffset, bytes: UnsafeRawBufferPointer) throws(LogStoreError) -> Header {
        guard bytes.count >= overhead else {
            throw LogStoreError(
                .corruptEntry, "\(bytes.count) bytes, shorter than the \(overhead)-byte envelope", offset: offset)
        }
        let version = bytes.load(as: UInt8.self)
        guard version == currentVersion else {
            throw LogStoreError(
                .unknownFormatVersion,
                "format version \(version), this build reads version \(currentVersion)", offset: offset)
        }
        let length = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
        guard length == bytes.count - overhead else {
            throw LogStoreError(
                .corruptEntry, "length field says \(length) payload bytes, the entry holds \(bytes.count - overhead)",
                offset: offset)
        }
        let covered = headerSize + length
        let stored = UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: covered, as: UInt32.self))
        var crc = withUnsafeBytes(of: offset.key) { CRC32C.update(0, $0) }
        crc = CRC32C.update(crc, UnsafeRawBufferPointer(rebasing: bytes[0..<covered]))
        guard crc == stored else {
            throw LogStoreError(
                .corruptEntry,
                "checksum mismatch (stored \(hex32(stored)), computed \(hex32(crc)))", offset: offset)
        }
        let kind = EntryKind(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
        let time = EntryTime(
            microsecondsSince1970: Int64(bigEndian: bytes.loadUnaligned(fromByteOffset: 4, as: Int64.self)))
        return Header(kind: kind, time: time, length: length)
    }
}

func hex32(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
}
