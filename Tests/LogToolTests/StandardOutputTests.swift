import Foundation
import LogToolCore
import TemporaryDirectory
import Testing

@testable import LogSyncDiagnostics

#if canImport(Glibc)
    import Glibc
#endif

@Suite("StandardOutput")
struct StandardOutputTests {
    @Test(arguments: [1, 7, 64 << 10])
    func writesEverythingInOrder(capacity: Int) throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("out").path
            let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(descriptor >= 0)
            var output = StandardOutput(fileDescriptor: descriptor, capacity: capacity)
            var expected = ""
            for index in 0..<5000 {
                let line = "line \(index) ✓\n"
                output.write(line)
                expected += line
            }
            try output.flush()
            close(descriptor)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == expected)
        }
    }

    @Test func aFailedWriteIsReportedByFlush() {
        var output = StandardOutput(fileDescriptor: -1, capacity: 4)
        output.write("more than four bytes")
        #expect(throws: LogToolError.self) { try output.flush() }
    }
}
