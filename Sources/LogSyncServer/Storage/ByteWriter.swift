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
    /// A count, then each element as `element` writes it (read back with `ByteReader.list`).
    mutating func list<Element>(_ elements: [Element], _ element: (inout ByteWriter, Element) -> Void) {
        u64(UInt64(elements.count))
        for value in elements { element(&self, value) }
    }
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

    /// A count, then that many elements read by `element`; a count larger than the bytes
    /// could hold is malformed.
    mutating func list<Element>(
        _ element: (inout ByteReader) throws(LogStoreError) -> Element
    ) throws(LogStoreError) -> [Element] {
        let count = try u64()
        guard count <= UInt64(bytes.count) else { throw failure() }
        var elements: [Element] = []
        elements.reserveCapacity(Int(count))
        for _ in 0..<count { elements.append(try element(&self)) }
        return elements
    }

    /// Whether bytes are left: a later version's fields after an earlier version's value.
    var hasMore: Bool { position < bytes.count }
}

/// A value of the server's index tables, written with `ByteWriter` and read back with
/// `ByteReader`; its `encoded` bytes and its decoding come from here.
protocol IndexValue {
    /// What the value is, for the error a malformed one gives ("zone state").
    static var what: String { get }
    /// Writes the value's fields.
    func write(to writer: inout ByteWriter)
    /// Reads the fields `write(to:)` wrote.
    init(reading reader: inout ByteReader) throws(LogStoreError)
}

extension IndexValue {
    var encoded: [UInt8] {
        var writer = ByteWriter()
        write(to: &writer)
        return writer.bytes
    }

    init(decoding bytes: [UInt8]) throws(LogStoreError) {
        var reader = ByteReader(bytes, what: Self.what)
        try self.init(reading: &reader)
    }
}

func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

/// Appends `value`'s 8 big-endian bytes to `bytes` (a key built in one array).
func appendBigEndian(_ value: UInt64, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
}

func readBigEndian(_ bytes: UnsafeRawBufferPointer, at position: Int = 0) -> UInt64 {
    bytes[position..<(position + 8)].reduce(0) { $0 << 8 | UInt64($1) }
}
