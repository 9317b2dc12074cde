import ChildProcesses
import Foundation
import KeyValueLog
import TemporaryDirectory
import Testing

@testable import LogStore

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Crash safety")
struct CrashTests {
    /// A child appends continuously and reports every committed offset; it is killed with
    /// SIGKILL after a random number of commits, 24 times. After every kill the log must hold
    /// dense offsets with valid checksums, everything reported, and projections equal to a rebuild.
    @Test func sigkillAtRandomMomentsLosesNothingAcknowledged() async throws {
        try await withTemporaryDirectory { directory in
            var random = SeededRandom(seed: 2026)
            var reported = LogOffset.zero
            for round in 0..<24 {
                let child = try ChildProcess.start([directory.path, String(round)], program: "logstore-crasher")
                // Kill after a random number of commits: the child is then anywhere in its loop,
                // possibly inside a commit or a map growth.
                let commits = Int.random(in: 1...120, using: &random)
                let seen = try await child.waitForOutputLines(commits)
                child.send(SIGKILL)
                for (index, line) in seen.enumerated() {
                    let offset = try #require(UInt64(line), "child printed \(line)")
                    #expect(offset > reported.rawValue || (index == 0 && offset >= reported.rawValue))
                    reported = LogOffset(offset)
                }
                let killed = await child.finish()
                #expect(killed.status == 128 + SIGKILL, "round \(round): \(killed)")
                // What it printed between the lines read and the kill: also committed.
                for line in killed.output.split(separator: "\n").dropFirst(commits) {
                    if let offset = UInt64(line) { reported = LogOffset(offset) }
                }

                // Read-only first, so nothing is repaired by opening: what the child left is checked as is.
                let log = try Log.open(
                    at: directory, options: .init(durability: .durable, readOnly: true),
                    projections: [LatestValueProjection()])
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
