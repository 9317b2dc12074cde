import Foundation
import LogStoreFixtures
import Testing

@testable import LogStore

#if canImport(Glibc)
import Glibc
#endif

/// Reads a child's stdout line by line, blocking (the child writes a line per commit).
final class LineReader {
    let handle: FileHandle
    var buffer: [UInt8] = []

    init(_ handle: FileHandle) { self.handle = handle }

    func nextLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let data = handle.availableData
            if data.isEmpty { return nil }
            buffer += data
        }
    }
}

@Suite("Crash safety")
struct CrashTests {
    /// A child appends continuously and reports every committed offset; it is killed with
    /// SIGKILL after a random number of commits, 24 times. After every kill the log must hold
    /// dense offsets with valid checksums, everything reported, and projections equal to a rebuild.
    @Test func sigkillAtRandomMomentsLosesNothingAcknowledged() async throws {
        let crasher = try builtExecutable("logstore-crasher")
        try await withTemporaryDirectory { directory in
            var random = SeededRandom(seed: 2026)
            var reported = LogOffset.zero
            for round in 0..<24 {
                let child = Process()
                child.executableURL = crasher
                child.arguments = [directory.path, String(round)]
                let output = Pipe()
                child.standardOutput = output
                let errors = Pipe()
                child.standardError = errors
                try child.run()
                let reader = LineReader(output.fileHandleForReading)
                // Kill after a random number of commits: the child is then anywhere in its loop,
                // possibly inside a commit or a map growth.
                let commits = Int.random(in: 1...120, using: &random)
                var seenThisRound = 0
                while seenThisRound < commits, let line = reader.nextLine() {
                    let offset = try #require(UInt64(line), "child printed \(line)")
                    #expect(offset > reported.rawValue || (seenThisRound == 0 && offset >= reported.rawValue))
                    reported = LogOffset(offset)
                    seenThisRound += 1
                }
                kill(child.processIdentifier, SIGKILL)
                child.waitUntilExit()
                #expect(child.terminationReason == .uncaughtSignal, "round \(round): \(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))")
                #expect(seenThisRound == commits)
                // Drain what it printed between our last read and the kill: also committed.
                while let line = reader.nextLine() { if let offset = UInt64(line) { reported = LogOffset(offset) } }

                // Read-only first, so nothing is repaired by opening: what the child left is checked as is.
                let log = try Log.open(
                    at: directory, options: .init(durability: .durable, readOnly: true), projections: [LatestValueProjection()])
                let last = try log.lastOffset
                #expect(last >= reported, "round \(round): reported \(reported) committed, the log ends at \(last)")
                #expect(try log.entryCount == Int(last.rawValue))
                var expected = LogOffset.first
                try log.forEachEntry { entry in  // checks density and every checksum
                    #expect(entry.offset == expected)
                    expected = expected.next
                }
                #expect(expected == last.next)
                #expect(try log.appliedOffsets() == ["latest": last])
                let mismatch = try log.verifyProjections()
                #expect(mismatch == nil, "round \(round): \(String(describing: mismatch))")
            }
            #expect(reported > 100)
        }
    }
}
