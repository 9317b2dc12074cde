import CCRC32C

/// CRC-32C (Castagnoli), the checksum of every log entry: with the CPU's checksum instruction
/// where there is one (SSE4.2, arm64 CRC), else with slicing-by-8 tables. Both give the same
/// values; the instruction is what keeps appends near raw LMDB speed (Docs/Performance.md).
package enum CRC32C {
    /// Whether this CPU computes CRC-32C in hardware.
    package static let usesHardware = logsync_crc32c_hardware_available() != 0

    static let polynomial: UInt32 = 0x82F6_3B78  // reflected 0x1EDC6F41

    /// 8 tables of 256 entries; table k advances the CRC over a byte followed by k zero bytes.
    static let tables: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ polynomial : crc >> 1 }
            table[byte] = crc
        }
        for byte in 0..<256 {
            var crc = table[byte]
            for k in 1..<8 {
                crc = table[Int(crc & 0xFF)] ^ (crc >> 8)
                table[k * 256 + byte] = crc
            }
        }
        return table
    }()

    /// Continues `crc` (0 to start) over `bytes`.
    @inline(__always)
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        if usesHardware { return logsync_crc32c_hardware(crc, bytes.baseAddress, bytes.count) }
        return updateWithTables(crc, bytes)
    }

    /// Continues `crc` (0 to start) over `bytes` with the tables alone.
    package static func updateWithTables(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = ~crc
        guard var p = bytes.baseAddress else { return ~crc }
        var count = bytes.count
        tables.withUnsafeBufferPointer { t in
            while count >= 8 {
                let word = p.loadUnaligned(as: UInt64.self).littleEndian ^ UInt64(crc)
                crc =
                    t[7 * 256 + Int(word & 0xFF)]
                    ^ t[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((word >> 16) & 0xFF)]
                    ^ t[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ t[3 * 256 + Int((word >> 32) & 0xFF)]
                    ^ t[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ t[1 * 256 + Int((word >> 48) & 0xFF)]
                    ^ t[Int(word >> 56)]
                p += 8
                count -= 8
            }
            while count > 0 {
                crc = t[Int((crc ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
                p += 1
                count -= 1
            }
        }
        return ~crc
    }

    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }
}
