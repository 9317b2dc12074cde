/// `count` bytes that differ from one position to the next (an xorshift sequence started from
/// `seed`), so that a piece of an asset read from, or copied to, the wrong place shows; another
/// `seed` gives other bytes.
///
/// ```swift
/// let photo = patternedBytes(3_000_000, seed: 7)   // several upload pieces
/// ```
public func patternedBytes(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var state = seed &* 2_654_435_761 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return UInt8(truncatingIfNeeded: state)
    }
}
