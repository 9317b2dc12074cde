import LogStore

/// Appends big-endian integers and length-prefixed strings: the values of the server's indexes.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
    mutating func data(_ value: [UInt8]) {
        u64(UInt64(value.count))
        bytes.append(contentsOf: value)
    }
    mutating func string(_ value: String) { data(Array(value.utf8)) }
}

/// Reads what `ByteWriter` wrote; a short or malformed value is a projection inconsistency.
struct ByteReader {
    let bytes: [UInt8]
    var position = 0
    let what: String

    init(_ bytes: [UInt8], what: String) {
        self.bytes = bytes
        self.what = what
    }

    private func failure() -> LogStoreError {
        LogStoreError(.projectionInconsistent, "malformed \(what) (\(bytes.count) bytes)")
    }

    mutating func u8() throws(LogStoreError) -> UInt8 {
        guard position < bytes.count else { throw failure() }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u64() throws(LogStoreError) -> UInt64 {
        guard position + 8 <= bytes.count else { throw failure() }
        defer { position += 8 }
        return bytes[position..<(position + 8)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func data() throws(LogStoreError) -> [UInt8] {
        let count = Int(try u64())
        guard count <= bytes.count - position else { throw failure() }
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    mutating func string() throws(LogStoreError) -> String { String(decoding: try data(), as: UTF8.self) }
}

func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

func readBigEndian(_ bytes: UnsafeRawBufferPointer, at position: Int = 0) -> UInt64 {
    bytes[position..<(position + 8)].reduce(0) { $0 << 8 | UInt64($1) }
}
