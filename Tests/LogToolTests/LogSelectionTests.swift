import LogToolCore
import Testing

@testable import LogSyncDiagnostics

@Suite("LogSelection and small helpers")
struct LogSelectionTests {
    @Test(
        arguments: [
            (nil, [], "main"),
            (nil, ["device"], "device"),
            ("b", ["a", "b"], "b"),
            ("absent", ["a"], "absent"),  // opening it fails with the log store's own error
            (nil, ["bundle", "device"], "device"),  // a support bundle: its entries, not its manifest
            ("bundle", ["bundle", "device"], "bundle"),
        ] as [(String?, [String], String)])
    func chooses(requested: String?, available: [String], expected: String) throws {
        #expect(try LogSelection.choose(requested: requested, available: available, path: "/x") == expected)
    }

    @Test func severalLogsAndNoneRequestedIsAnErrorListingThem() {
        #expect(throws: LogToolError("/x holds 3 logs (a, b, main); choose one with --log NAME")) {
            try LogSelection.choose(requested: nil, available: ["main", "b", "a"], path: "/x")
        }
    }

    @Test(arguments: [
        ("/tmp/logtool-demo-abc123", "/tmp/logtool-demo-abc123"),
        ("/tmp/a b", "'/tmp/a b'"),
        ("/tmp/it's", #"'/tmp/it'\''s'"#),
        ("", "''"),
        ("$HOME", "'$HOME'"),
    ])
    func shellQuoting(text: String, expected: String) {
        #expect(shellQuoted(text) == expected)
    }

    @Test func errorLinesAreOneLine() {
        #expect(LogToolError("first\nsecond\r\nthird").logToolErrorLine == "logtool: error: first second third\n")
    }
}
