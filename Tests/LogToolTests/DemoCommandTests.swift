import Foundation
import TemporaryDirectory
import Testing

/// `logtool demo`, run as a child process.
@Suite("logtool demo")
struct DemoCommandTests {
    @Test func writesALogPrintsItsDumpAndHowToDumpItAgain() async throws {
        try await withTemporaryDirectory { directory in
            let target = directory.appendingPathComponent("demo")
            let demo = try await runLogtool(["demo", "--dir", target.path], in: directory)
            #expect(demo.status == 0, "\(demo)")
            #expect(demo.standardError.isEmpty)
            #expect(demo.lines.first == "Wrote a demo log of 8 entries to \(target.path)")
            #expect(demo.lines.contains("  milk = \"1 litre\""))
            #expect(demo.lines.contains("  eggs = 0x0000000c"))
            #expect(!demo.lines.contains { $0.hasPrefix("  bread = ") })
            #expect(demo.lines.last == "  swift run logtool dump \(target.path)")

            let dumpLines = demo.lines.filter { offsetOfTextLine($0) != nil }
            #expect(dumpLines.map(offsetOfTextLine) == Array(1...8))

            let dump = try await runLogtool(["dump", target.path], in: directory)
            #expect(dump.status == 0, "\(dump)")
            #expect(dump.lines == dumpLines)
        }
    }

    @Test func withoutDirItWritesIntoANewTemporaryDirectory() async throws {
        try await withTemporaryDirectory { directory in
            // runLogtool points TMPDIR at `directory`.
            let demo = try await runLogtool(["demo"], in: directory)
            #expect(demo.status == 0, "\(demo)")
            let created = try #require(demo.lines.first?.components(separatedBy: " to ").last)
            #expect(created.hasPrefix(directory.appendingPathComponent("logtool-demo-").path), "\(demo)")
            #expect(FileManager.default.fileExists(atPath: created + "/data.mdb"))
            #expect(demo.lines.last == "  swift run logtool dump \(created)")
        }
    }

    @Test func refusesADirectoryThatIsNotEmpty() async throws {
        try await withTemporaryDirectory { directory in
            let target = directory.appendingPathComponent("busy")
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: false)
            try Data("keep me".utf8).write(to: target.appendingPathComponent("file"))
            let run = try await runLogtool(["demo", "--dir", target.path], in: directory)
            #expect(run.status == 1)
            #expect(run.standardOutput.isEmpty)
            #expect(
                run.standardError
                    == "logtool: error: \(target.path) is not an empty directory; give --dir a new or empty directory\n"
            )
        }
    }
}
