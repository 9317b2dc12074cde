import ChildProcesses
import Foundation
import LogSyncServer
import SyncModel
import TemporaryDirectory
import Testing

/// `logsync-server schema show` and `schema deploy` (F137): the schema of a development server's
/// data, deployed to a production server's data, which then refuses what it does not have.
@Suite("logsync-server schema")
struct SchemaCommandTests {
    static let notes = RecordZone.ID(zoneName: "Notes")

    /// A development server's data in `directory`: alice's notes and bob's folder.
    static func writeDevelopmentData(_ directory: URL) async throws {
        let server = try SyncServer(.init(directory: directory, durability: .fast))
        defer { server.shutdown() }
        for user: UserID in ["alice", "bob"] {
            _ = try await server.database(for: user).modifyZones(saving: [RecordZone(zoneID: notes)], deleting: [])
        }
        var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
        note["title"] = "Groceries"
        note["tags"] = .list([.string("home")])
        _ = try await server.database(for: "alice").modifyRecords(saving: [note], deleting: [])
        var folder = Record(recordType: "Folder", recordID: Record.ID(recordName: "f1", zoneID: notes))
        folder["name"] = "Home"
        _ = try await server.database(for: "bob").modifyRecords(saving: [folder], deleting: [])
    }

    // F137: show prints the development schema; deploy records it in the production data and prints
    // what it added; deploying again adds nothing; show then prints the production mode; a server on
    // that data refuses an unknown field, naming the record and the field.
    @Test("F137 schema deploy makes a production server from a development server's schema")
    func deployEndToEnd() async throws {
        try await withTemporaryDirectory { directory in
            let development = directory.appendingPathComponent("dev")
            let production = directory.appendingPathComponent("prod")
            try await Self.writeDevelopmentData(development)

            let shown = try await ChildProcess.run(["schema", "show", "--data", development.path])
            #expect(shown.status == 0, "\(shown)")
            #expect(shown.output == "mode: development\nFolder: name string\nNote: tags list<string>, title string\n")

            let deployed = try await ChildProcess.run([
                "schema", "deploy", "--from", development.path, "--to", "lmdb:" + production.path,
            ])
            #expect(deployed.status == 0, "\(deployed)")
            #expect(
                deployed.output == """
                    + Folder
                    + Folder.name string
                    + Note
                    + Note.tags list<string>
                    + Note.title string
                    deployed 2 record types, 3 fields at registry offset 1

                    """)
            let again = try await ChildProcess.run([
                "schema", "deploy", "--from", development.path, "--to", production.path,
            ])
            #expect(again.status == 0, "\(again)")
            #expect(
                again.output
                    == "nothing to deploy: every record type and field is deployed already (registry offset 1)\n")

            let shownProduction = try await ChildProcess.run(["schema", "show", "--data", production.path])
            #expect(
                shownProduction.output
                    == "mode: production (deployed at registry offset 1)\nFolder: name string\nNote: tags list<string>, title string\n"
            )
            let shownDevelopment = try await ChildProcess.run(["schema", "show", "--data", development.path])
            #expect(shownDevelopment.output.hasPrefix("mode: development\n"), "the development data is left as it was")

            let server = try SyncServer(.init(directory: production, durability: .fast))
            defer { server.shutdown() }
            #expect(server.schemaMode == .production)
            let database = server.database(for: "carol")
            _ = try await database.modifyZones(saving: [RecordZone(zoneID: Self.notes)], deleting: [])
            var note = Record(recordType: "Note", recordID: Record.ID(recordName: "n9", zoneID: Self.notes))
            note["colour"] = "red"
            let response = try await database.modifyRecords(saving: [note], deleting: [])
            guard case .failure(let error)? = response.saveResults[note.recordID] else {
                Issue.record("an unknown field was saved in production: \(response)")
                return
            }
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains(#"record "n9" in zone "Notes" sets field "colour""#), "\(error.message)")
        }
    }

    // F137: a --from that holds no server data, or no record type, is refused before the production
    // data is touched; a field whose kind differs from the deployed one is refused, naming it.
    @Test("F137 schema deploy refuses a source without data, an empty schema and a changed kind, writing nothing")
    func deployRefusals() async throws {
        try await withTemporaryDirectory { directory in
            let production = directory.appendingPathComponent("prod")
            let missing = try await ChildProcess.run([
                "schema", "deploy", "--from", directory.appendingPathComponent("nothing").path, "--to", production.path,
            ])
            #expect(missing.status != 0)
            #expect(missing.errorOutput.contains("holds no logsync-server data"), "\(missing)")
            #expect(!FileManager.default.fileExists(atPath: production.path), "nothing is written")
            let showMissing = try await ChildProcess.run(["schema", "show", "--data", production.path])
            #expect(showMissing.status != 0)
            #expect(showMissing.errorOutput.contains("holds no logsync-server data"), "\(showMissing)")
            #expect(!FileManager.default.fileExists(atPath: production.path), "show creates nothing")

            let empty = directory.appendingPathComponent("empty")
            let emptyServer = try SyncServer(.init(directory: empty, durability: .fast))
            emptyServer.shutdown()
            let refused = try await ChildProcess.run([
                "schema", "deploy", "--from", empty.path, "--to", production.path,
            ])
            #expect(refused.status != 0)
            #expect(refused.errorOutput.contains("has no record type"), "\(refused)")

            let development = directory.appendingPathComponent("dev")
            try await Self.writeDevelopmentData(development)
            do {
                let server = try SyncServer(.init(directory: production, durability: .fast))
                defer { server.shutdown() }
                try server.deploySchema(RecordSchema(["Note": ["title": .value(.int64)]]))
            }
            let conflict = try await ChildProcess.run([
                "schema", "deploy", "--from", development.path, "--to", production.path,
            ])
            #expect(conflict.status != 0)
            #expect(
                conflict.errorOutput.contains(
                    #"field "title" of record type "Note" holds int64 in one schema and string in the other"#),
                "\(conflict)")
            let shown = try await ChildProcess.run(["schema", "show", "--data", production.path])
            #expect(shown.output == "mode: production (deployed at registry offset 1)\nNote: title int64\n")
        }
    }
}
