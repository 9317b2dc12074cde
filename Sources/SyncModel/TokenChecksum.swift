import CCRC32C

/// The checksum that seals a change token: CRC-32C (Castagnoli), as LogStore checks each log
/// entry with, by the CPU's instruction where there is one (the C target `CCRC32C`), else bit by
/// bit: a token is a few dozen bytes.
enum TokenChecksum {
    /// Whether this CPU computes CRC-32C in hardware.
    static let usesHardware = logsync_crc32c_hardware_available() != 0

    /// The CRC-32C of `bytes`.
    static func crc32c(_ bytes: [UInt8]) -> UInt32 {
        guard usesHardware else { return crc32cBitwise(bytes) }
        return bytes.withUnsafeBytes { logsync_crc32c_hardware(0, $0.baseAddress, $0.count) }
    }

    /// The CRC-32C of `bytes` without the CPU's instruction: what a CPU without one computes.
    static func crc32cBitwise(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = ~0
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }
}
