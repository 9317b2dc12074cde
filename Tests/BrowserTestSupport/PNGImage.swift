import Foundation

/// A PNG image decoded to RGBA pixels, for the tests that look at a browser's screenshot.
///
/// Enough of PNG for Chromium's screenshots: 8-bit RGB or RGBA, not interlaced; the IDAT
/// stream inflated by ``Inflater`` (DEFLATE, RFC 1951: stored, fixed and dynamic Huffman
/// blocks), the scanlines unfiltered (None, Sub, Up, Average, Paeth). Anything else throws.
public struct PNGImage: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let width: Int
    public let height: Int
    /// RGBA bytes, row by row.
    public let pixels: [UInt8]

    public init(_ data: Data) throws {
        let bytes = [UInt8](data)
        guard bytes.count > 8, bytes.prefix(8).elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            throw Failure(description: "not a PNG file")
        }
        var position = 8
        var width = 0
        var height = 0
        var colorType = 0
        var compressed: [UInt8] = []
        func be32(_ at: Int) -> Int {
            Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        }
        while position + 8 <= bytes.count {
            let length = be32(position)
            let type = String(decoding: bytes[(position + 4)..<(position + 8)], as: UTF8.self)
            let body = position + 8
            guard body + length + 4 <= bytes.count else {
                throw Failure(description: "chunk \(type) runs past the end")
            }
            switch type {
            case "IHDR":
                width = be32(body)
                height = be32(body + 4)
                guard bytes[body + 8] == 8 else { throw Failure(description: "bit depth \(bytes[body + 8])") }
                colorType = Int(bytes[body + 9])
                guard colorType == 2 || colorType == 6 else { throw Failure(description: "colour type \(colorType)") }
                guard bytes[body + 12] == 0 else { throw Failure(description: "interlaced") }
            case "IDAT":
                compressed += bytes[body..<(body + length)]
            default:
                break
            }
            position = body + length + 4
        }
        guard compressed.count > 2 else { throw Failure(description: "no image data") }
        var inflater = Inflater(Array(compressed.dropFirst(2)))  // after the zlib header
        let raw = try inflater.inflate()
        let channels = colorType == 6 ? 4 : 3
        let stride = width * channels
        guard raw.count >= height * (stride + 1) else {
            throw Failure(description: "\(raw.count) bytes of image data, too few")
        }
        var rows = [UInt8](repeating: 0, count: height * stride)
        for y in 0..<height {
            let filter = raw[y * (stride + 1)]
            let line = y * (stride + 1) + 1
            for x in 0..<stride {
                let value = raw[line + x]
                let a = x >= channels ? Int(rows[y * stride + x - channels]) : 0
                let b = y > 0 ? Int(rows[(y - 1) * stride + x]) : 0
                let c = x >= channels && y > 0 ? Int(rows[(y - 1) * stride + x - channels]) : 0
                let predicted: Int
                switch filter {
                case 0: predicted = 0
                case 1: predicted = a
                case 2: predicted = b
                case 3: predicted = (a + b) / 2
                case 4:
                    let p = a + b - c
                    let pa = abs(p - a)
                    let pb = abs(p - b)
                    let pc = abs(p - c)
                    predicted = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c)
                default: throw Failure(description: "filter \(filter) in row \(y)")
                }
                rows[y * stride + x] = UInt8(truncatingIfNeeded: Int(value) + predicted)
            }
        }
        var rgba = [UInt8](repeating: 255, count: width * height * 4)
        for index in 0..<(width * height) {
            for channel in 0..<channels { rgba[index * 4 + channel] = rows[index * channels + channel] }
        }
        self.width = width
        self.height = height
        self.pixels = rgba
    }

    /// How many pixels have exactly the colour `#rrggbb`.
    public func count(of hex: String) -> Int {
        let value = Int(hex.dropFirst(), radix: 16) ?? -1
        let (r, g, b) = (UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF))
        var count = 0
        var index = 0
        while index < pixels.count {
            if pixels[index] == r && pixels[index + 1] == g && pixels[index + 2] == b { count += 1 }
            index += 4
        }
        return count
    }

    /// The rows (y) in which the colour `#rrggbb` covers at least `share` of the width.
    public func rows(mostly hex: String, share: Double = 0.5) -> [Int] {
        let value = Int(hex.dropFirst(), radix: 16) ?? -1
        let (r, g, b) = (UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF))
        return (0..<height).filter { y in
            var count = 0
            for x in 0..<width {
                let i = (y * width + x) * 4
                if pixels[i] == r && pixels[i + 1] == g && pixels[i + 2] == b { count += 1 }
            }
            return Double(count) >= share * Double(width)
        }
    }
}

/// DEFLATE (RFC 1951), just enough to read PNG data.
struct Inflater {
    private let input: [UInt8]
    private var bit = 0
    private var output: [UInt8] = []

    init(_ input: [UInt8]) { self.input = input }

    mutating func inflate() throws -> [UInt8] {
        var final = false
        while !final {
            final = try bits(1) == 1
            switch try bits(2) {
            case 0:
                bit = (bit + 7) & ~7
                var at = bit / 8
                guard at + 4 <= input.count else { throw PNGImage.Failure(description: "stored block past the end") }
                let length = Int(input[at]) | Int(input[at + 1]) << 8
                at += 4
                guard at + length <= input.count else {
                    throw PNGImage.Failure(description: "stored block past the end")
                }
                output += input[at..<(at + length)]
                bit = (at + length) * 8
            case 1:
                try block(
                    literals: Huffman(lengths: Self.fixedLiteralLengths),
                    distances: Huffman(lengths: Array(repeating: 5, count: 30)))
            case 2:
                let literalCount = try bits(5) + 257
                let distanceCount = try bits(5) + 1
                let codeCount = try bits(4) + 4
                let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
                var codeLengths = [Int](repeating: 0, count: 19)
                for i in 0..<codeCount { codeLengths[order[i]] = try bits(3) }
                let codes = Huffman(lengths: codeLengths)
                var lengths: [Int] = []
                while lengths.count < literalCount + distanceCount {
                    let symbol = try decode(codes)
                    switch symbol {
                    case 0..<16: lengths.append(symbol)
                    case 16:
                        guard let last = lengths.last else {
                            throw PNGImage.Failure(description: "repeat with nothing before")
                        }
                        lengths += Array(repeating: last, count: try bits(2) + 3)
                    case 17: lengths += Array(repeating: 0, count: try bits(3) + 3)
                    default: lengths += Array(repeating: 0, count: try bits(7) + 11)
                    }
                }
                try block(
                    literals: Huffman(lengths: Array(lengths[0..<literalCount])),
                    distances: Huffman(lengths: Array(lengths[literalCount...])))
            default:
                throw PNGImage.Failure(description: "block type 3")
            }
        }
        return output
    }

    static let fixedLiteralLengths: [Int] =
        Array(repeating: 8, count: 144) + Array(repeating: 9, count: 112) + Array(repeating: 7, count: 24)
        + Array(repeating: 8, count: 8)
    static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    static let distanceExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]

    private mutating func block(literals: Huffman, distances: Huffman) throws {
        while true {
            let symbol = try decode(literals)
            if symbol < 256 {
                output.append(UInt8(symbol))
            } else if symbol == 256 {
                return
            } else {
                let index = symbol - 257
                guard index < 29 else { throw PNGImage.Failure(description: "length symbol \(symbol)") }
                let length = Self.lengthBase[index] + (try bits(Self.lengthExtra[index]))
                let d = try decode(distances)
                guard d < 30 else { throw PNGImage.Failure(description: "distance symbol \(d)") }
                let distance = Self.distanceBase[d] + (try bits(Self.distanceExtra[d]))
                guard distance <= output.count else {
                    throw PNGImage.Failure(description: "distance \(distance) too far")
                }
                let start = output.count - distance
                for i in 0..<length { output.append(output[start + i]) }
            }
        }
    }

    private mutating func bits(_ count: Int) throws -> Int {
        var value = 0
        for i in 0..<count {
            let byte = bit >> 3
            guard byte < input.count else { throw PNGImage.Failure(description: "data ends early") }
            value |= Int(input[byte] >> UInt8(bit & 7) & 1) << i
            bit += 1
        }
        return value
    }

    /// Canonical Huffman codes: counts per length and symbols sorted by code.
    struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int] = []
        init(lengths: [Int]) {
            for length in lengths { counts[length] += 1 }
            counts[0] = 0
            var offsets = [Int](repeating: 0, count: 16)
            for length in 1..<16 { offsets[length] = offsets[length - 1] + counts[length - 1] }
            symbols = [Int](repeating: 0, count: lengths.count)
            for (symbol, length) in lengths.enumerated() where length > 0 {
                symbols[offsets[length]] = symbol
                offsets[length] += 1
            }
        }
    }

    private mutating func decode(_ huffman: Huffman) throws -> Int {
        var code = 0
        var first = 0
        var index = 0
        for length in 1..<16 {
            code |= try bits(1)
            let count = huffman.counts[length]
            if code - count < first { return huffman.symbols[index + (code - first)] }
            index += count
            first = (first + count) << 1
            code <<= 1
        }
        throw PNGImage.Failure(description: "bad Huffman code")
    }
}
