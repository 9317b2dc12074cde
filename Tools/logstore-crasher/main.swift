// Appends to a log forever, printing the last offset of every committed append on stdout.
// The crash-safety test kills it with SIGKILL at random moments and checks that the log it
// left behind is intact and holds everything reported here.
//
// Usage: logstore-crasher DIRECTORY SEED
import Foundation
import KeyValueLog
import LogStore

let arguments = CommandLine.arguments
guard arguments.count == 3, let seed = UInt64(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: logstore-crasher DIRECTORY SEED\n".utf8))
    exit(2)
}

var random = SeededRandom(seed: seed)
do {
    // A tiny map so the child also crashes in the middle of growing it.
    let log = try Log.open(
        at: URL(fileURLWithPath: arguments[1]),
        options: .init(durability: .durable, initialMapSize: 128 << 10),
        projections: [LatestValueProjection()])
    while true {
        let count = Int.random(in: 1...40, using: &random)
        var batch: [NewEntry] = []
        for _ in 0..<count {
            let key = "k\(Int.random(in: 0..<200, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                batch.append(KeyValueEntry.remove(key: key).newEntry)
            case 1:
                batch.append(
                    KeyValueEntry.note([UInt8](repeating: 7, count: Int.random(in: 0..<64, using: &random))).newEntry)
            case 2:
                // Larger than a page: stored in overflow pages.
                let size = Int.random(in: 2_000..<9_000, using: &random)
                batch.append(
                    KeyValueEntry.set(key: key, value: (0..<size).map { UInt8(truncatingIfNeeded: $0) }).newEntry)
            default:
                let size = Int.random(in: 1..<300, using: &random)
                batch.append(
                    KeyValueEntry.set(
                        key: key, value: (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
                    ).newEntry)
            }
        }
        let offsets = try log.append(batch)
        // Unbuffered: once the line is out, the commit it reports is durable.
        FileHandle.standardOutput.write(Data("\(offsets.upperBound.rawValue - 1)\n".utf8))
    }
} catch {
    FileHandle.standardError.write(Data("logstore-crasher: \(error)\n".utf8))
    exit(1)
}
