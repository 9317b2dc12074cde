import KeyValueLog
import LogStore

/// The entries every path appends: `KeyValueEntry.set` with keys drawn from `keyCount`
/// distinct keys, padded so that each payload holds exactly `payloadSize` bytes.
///
/// Built once per payload size, outside every timed section. Entry `j` of a run is the pool's
/// entry `j % keyCount`; the pool lists the keys in a fixed pseudo-random order, so the
/// projection's `values` table is updated at scattered keys rather than in key order.
final class Workload {
    static let keyCount = 10_000
    /// Keys are "k" followed by 7 decimal digits.
    static let keyBytes = 8

    let payloadSize: Int
    /// The pool of entries, for LogStore.
    let entries: [NewEntry]
    /// The same payloads, contiguous (`keyCount × payloadSize` bytes), for the raw path.
    let payloads: UnsafeMutableRawBufferPointer

    init(payloadSize: Int) {
        self.payloadSize = payloadSize
        var order = Array(0..<Self.keyCount)
        var random = SplitMix64(seed: 0x4C6F_6753_796E_63)  // fixed: every run appends the same bytes
        for i in stride(from: order.count - 1, to: 0, by: -1) {
            order.swapAt(i, Int(random.next() % UInt64(i + 1)))
        }
        let valueBytes = payloadSize - 1 - Self.keyBytes
        var entries: [NewEntry] = []
        entries.reserveCapacity(Self.keyCount)
        let payloads = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.keyCount * payloadSize, alignment: 16)
        for (position, keyIndex) in order.enumerated() {
            let digits = String(keyIndex)
            let key = "k" + String(repeating: "0", count: Self.keyBytes - 1 - digits.count) + digits
            let value = (0..<valueBytes).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ keyIndex) }
            let entry = KeyValueEntry.set(key: key, value: value).newEntry
            precondition(entry.payload.count == payloadSize, "payload of \(entry.payload.count) bytes")
            entries.append(entry)
            entry.payload.withUnsafeBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: payloads[(position * payloadSize)...])
                    .copyMemory(from: source)
            }
        }
        self.entries = entries
        self.payloads = payloads
    }

    deinit { payloads.deallocate() }

    /// The payload of entry `index` of a run (valid while the workload lives).
    @inline(__always)
    func payload(_ index: Int) -> UnsafeMutableRawPointer {
        payloads.baseAddress! + (index % Self.keyCount) * payloadSize
    }

    /// The batches for `count` entries in transactions of `size`, prepared before timing.
    /// Batches repeat with the key pool, so only the distinct ones are built (one cycle plus a
    /// final partial batch); arrays share the pool's payload buffers.
    func batches(count: Int, size: Int) -> Batches {
        let period = Self.keyCount / gcd(Self.keyCount, size)
        let full = count / size
        var cycle: [[NewEntry]] = []
        for b in 0..<min(period, full) {
            cycle.append((0..<size).map { entries[(b * size + $0) % Self.keyCount] })
        }
        let rest = count - full * size
        let last = (0..<rest).map { entries[(full * size + $0) % Self.keyCount] }
        return Batches(cycle: cycle, fullBatches: full, last: last)
    }
}

struct Batches {
    var cycle: [[NewEntry]]
    var fullBatches: Int
    var last: [NewEntry]

    /// Calls `body` with every batch in order.
    @inline(__always)
    func forEach(_ body: ([NewEntry]) throws -> Void) rethrows {
        var position = 0
        for _ in 0..<fullBatches {
            try body(cycle[position])
            position += 1
            if position == cycle.count { position = 0 }
        }
        if !last.isEmpty { try body(last) }
    }
}

func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

/// A small deterministic generator (SplitMix64).
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The map size given to both the raw environment and LogStore's, so that neither grows its
/// map during a run: room for `count` entries of `payloadSize` plus their envelope, key and
/// node overhead, twice over (pages are not full, copy-on-write needs free pages), plus the
/// projection's tables, rounded up to a power of two. The file itself is sparse.
func presizedMapSize(entries count: Int, payloadSize: Int) -> Int {
    let perEntry = payloadSize + 20 + 8 + 16
    let projection = Workload.keyCount * (payloadSize + 32) * 4
    let estimate = 2 * count * perEntry + projection + (64 << 20)
    var size = 64 << 20
    while size < estimate { size <<= 1 }
    return size
}
