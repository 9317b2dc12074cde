import ChildProcesses
import Foundation
import GRDB
import LogStore
import LogSync
import SyncModel
import TemporaryDirectory
import Testing

/// The README's "Sharing with other users" walkthrough with every party a process of its own: a
/// `logsync-server` with three users, and one `notes-device` of each (alice-phone, bob-laptop,
/// carol-phone), each with its own data directory, SQLite file and two device logs. Reads like the
/// timeline it runs; every sync is a command run to its end, so nothing waits on a clock.
@Suite("Sharing between users, with the server and devices as processes", .timeLimit(.minutes(3)))
struct SharingProcessTests {
    typealias Device = DeviceProcessTests.Device

    /// A `logsync-server` trusting a local issuer (`dev-issuer`), serving a fresh temporary
    /// directory, its URL, and a maker of devices: `device(name, user)` signs a device of `user`'s
    /// in, with an identity token vouching for `user@example.com` (by which owners invite them),
    /// and keeps its notes in a folder of its own, `notes-NAME`. Users are `dev:<user>`.
    static func withServedUsers(
        _ body: (_ url: URL, _ device: (_ name: String, _ user: String) async throws -> Device) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let issuer = try await LocalIssuer.make(in: directory)
            let (server, url) = try await DeviceProcessTests.serve(
                directory.appendingPathComponent("server").path, identityConfig: issuer.configurationFile)
            try await body(url) { name, user in
                let device = Device(
                    name: name, directory: directory.appendingPathComponent("notes-\(name)"), token: nil)
                let signedIn = try await device.signIn(
                    issuer.token(subject: user, email: "\(user)@example.com"), server: url)
                #expect(signedIn.contains("\(name): signed in as dev:\(user)"), "\(signedIn)")
                return device
            }
            // Every story ends with the server stopping cleanly.
            #expect(try await server.terminate().status == 0)
        }
    }

    /// ``withServedUsers(_:_:)`` with alice's phone and bob's laptop.
    static func withAlicePhoneAndBobLaptop(
        _ body: (_ url: URL, _ alice: Device, _ bob: Device) async throws -> Void
    ) async throws {
        try await withServedUsers { url, device in
            try await body(url, try await device("alice-phone", "alice"), try await device("bob-laptop", "bob"))
        }
    }

    /// Reads a device's SQLite file.
    static func read<T>(_ device: Device, _ body: (Database) throws -> T) throws -> T {
        try DatabaseQueue(path: device.directory.appendingPathComponent("notes.sqlite").path).read(body)
    }

    /// The user record names of the owners whose Notes a device holds (their shares accepted).
    static func sharedOwners(of device: Device) throws -> [String] {
        try read(device) { try String.fetchAll($0, sql: "SELECT ownerName FROM sharedOwners ORDER BY ownerName") }
    }

    /// The notes of the Notes zone of `ownerName` (the user's own with their record name) in a
    /// device's SQLite file, each as its set fields (`nil` when the device holds no such folder).
    static func notes(of device: Device, ownerName: String) throws -> [String: [String: String]]? {
        try read(device) { db in
            let folder = "Notes.\(ownerName)"
            guard
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM folders WHERE id = ?)", arguments: [folder])
                    == true
            else { return nil }
            var notes: [String: [String: String]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM notes WHERE folderID = ?", arguments: [folder]) {
                var fields: [String: String] = [:]
                for column in ["title", "body", "attachment"] {
                    if let text: String = row[column] { fields[column] = text }
                }
                notes[row["name"]] = fields
            }
            return notes
        }
    }

    @Test(
        "F119 F121 F124 README: alice shares Notes with bob (read-write) and carol (read-only); bob edits, alice sees it, carol is refused, bob is removed and his copy goes"
    )
    func sharingWalkthrough() async throws {
        try await Self.withServedUsers { url, device in
            let alice = try await device("alice-phone", "alice")
            let bob = try await device("bob-laptop", "bob")
            let carol = try await device("carol-phone", "carol")

            // 1. Alice writes a note, and shares her Notes zone: bob may edit, carol may read.
            try await alice.run("set", "groceries", "title", "Groceries", server: url)
            let toBob = try await alice.run(
                "share", "--with", "bob@example.com", "--permission", "read-write", server: url)
            #expect(
                toBob.contains("alice-phone: saved the share of Notes: bob@example.com read-write pending\n"),
                "\(toBob)")
            #expect(toBob.contains("alice-phone: the share's URL: logsync://share/"), "\(toBob)")
            let toCarol = try await alice.run(
                "share", "--with", "carol@example.com", "--permission", "read-only", server: url)
            #expect(
                toCarol.contains(
                    "alice-phone: saved the share of Notes: bob@example.com read-write pending, carol@example.com read-only pending\n"
                ),
                "\(toCarol)")
            let shareURL = try await alice.run("share", "--url", server: url).trimmingCharacters(
                in: .whitespacesAndNewlines)
            #expect(shareURL.hasPrefix("logsync://share/") && !shareURL.contains(" "), "\(shareURL)")
            #expect(toCarol.contains("the share's URL: \(shareURL)\n"), "the URL stays the same: \(toCarol)")

            // 2. Both accept the URL alice sent them: the zone appears in their shared databases.
            let bobJoins = try await bob.run("accept", shareURL, server: url)
            #expect(
                bobJoins.contains("bob-laptop: accepted the share of Notes of alice@example.com: read-write\n"),
                "\(bobJoins)")
            #expect(
                bobJoins.contains(#"bob-laptop: fetched groceries of alice@example.com {title: "Groceries"}"#),
                "\(bobJoins)")
            let carolJoins = try await carol.run("accept", shareURL, server: url)
            #expect(
                carolJoins.contains("carol-phone: accepted the share of Notes of alice@example.com: read-only\n"),
                "\(carolJoins)")
            #expect(
                carolJoins.contains(#"carol-phone: fetched groceries of alice@example.com {title: "Groceries"}"#),
                "\(carolJoins)")

            // 3. Bob edits alice's note; alice's next sync brings his edit, and both acceptances.
            let edited = try await bob.run(
                "set", "--owner", "alice@example.com", "groceries", "body", "milk, eggs", server: url)
            #expect(
                edited.contains(
                    #"bob-laptop: saved groceries of alice@example.com {body: "milk, eggs", title: "Groceries"}"#),
                "\(edited)")
            let aliceSees = try await alice.run("sync", server: url)
            #expect(
                aliceSees.contains(#"alice-phone: fetched groceries {body: "milk, eggs", title: "Groceries"}"#),
                "\(aliceSees)")
            #expect(
                aliceSees.contains(
                    "alice-phone: the share of Notes: bob@example.com read-write accepted, carol@example.com read-only accepted\n"
                ),
                "\(aliceSees)")

            // 4. Carol may only read: the server refuses her edit, her copy goes back, the command fails.
            let refused = try await carol.run(
                "set", "--owner", "alice@example.com", "groceries", "title", "Carol's list", server: url, expecting: 1)
            #expect(
                refused.contains(
                    "carol-phone: could not save groceries of alice@example.com: alice@example.com shares Notes with this user read-only (permissionFailure)\n"
                ),
                "\(refused)")
            #expect(
                refused.contains(
                    #"carol-phone: groceries of alice@example.com {title: "Groceries"} is back to the server's copy"#),
                "\(refused)")
            #expect(
                refused.contains("Error: carol-phone: the server refused groceries of alice@example.com"), "\(refused)")
            let carolSyncs = try await carol.run("sync", server: url)
            #expect(
                carolSyncs.contains(
                    #"carol-phone: groceries of alice@example.com {body: "milk, eggs", title: "Groceries"}"#),
                "\(carolSyncs)")
            #expect(!carolSyncs.contains("Carol's list"), "\(carolSyncs)")
            let aliceUnchanged = try await alice.run("sync", server: url)
            #expect(
                aliceUnchanged.contains(#"alice-phone: groceries {body: "milk, eggs", title: "Groceries"}"#),
                "\(aliceUnchanged)")
            #expect(!aliceUnchanged.contains("Carol's list"), "\(aliceUnchanged)")

            // 5. Alice removes bob: at his next sync the zone leaves his shared database, and its notes his device.
            let removed = try await alice.run("unshare", "--remove", "bob@example.com", server: url)
            #expect(
                removed.contains("alice-phone: saved the share of Notes: carol@example.com read-only accepted\n"),
                "\(removed)")
            let bobLoses = try await bob.run("sync", server: url)
            #expect(
                bobLoses.contains(
                    "bob-laptop: alice@example.com no longer shares Notes with this user (zone deleted): its notes are gone from this device\n"
                ),
                "\(bobLoses)")
            #expect(bobLoses.hasSuffix("bob-laptop: no notes\n"), "\(bobLoses)")
            #expect(try await bob.run("show", server: url) == "bob-laptop: no notes\n")
            let bobDenied = try await bob.run(
                "set", "--owner", "alice@example.com", "groceries", "body", "more", server: url, expecting: 1)
            #expect(bobDenied.contains("bob-laptop holds no Notes zone shared by alice@example.com"), "\(bobDenied)")
            let carolKeeps = try await carol.run("sync", server: url)
            #expect(
                carolKeeps.contains(
                    #"carol-phone: groceries of alice@example.com {body: "milk, eggs", title: "Groceries"}"#),
                "\(carolKeeps)")

            // The devices' own files: notes.sqlite as shown, and a device log per engine.
            let ownerName = try #require(try Self.sharedOwners(of: carol).first)
            #expect(ownerName.hasPrefix("_user"), "the zone is named with the owner's user record name: \(ownerName)")
            #expect(
                try Self.notes(of: carol, ownerName: ownerName) == [
                    "groceries": ["title": "Groceries", "body": "milk, eggs"]
                ])
            #expect(try Self.notes(of: bob, ownerName: ownerName) == nil)
            #expect(try Self.sharedOwners(of: bob).isEmpty)
            #expect(
                try Self.notes(of: alice, ownerName: ownerName) == [
                    "groceries": ["title": "Groceries", "body": "milk, eggs"]
                ])
            for device in [alice, bob, carol] {
                for log in ["sync/private", "sync/shared"] {
                    let opened = try DeviceLog(
                        directory: device.directory.appendingPathComponent(log),
                        options: LogEnvironment.Options(readOnly: true))
                    var entries = 0
                    try opened.log.forEachEntry { _ in entries += 1 }
                    #expect(entries > 0, "\(device.name)/\(log) holds the engine's timeline")
                }
            }
        }
    }

    @Test(
        "F121 F124 a read-only participant's deletion is refused and the note stays; unshare alone deletes the share and the zone leaves the participant"
    )
    func readOnlyDeleteAndStopSharing() async throws {
        try await Self.withServedUsers { url, device in
            let alice = try await device("alice-phone", "alice")
            let carol = try await device("carol-phone", "carol")
            try await alice.run("set", "groceries", "title", "Groceries", server: url)
            try await alice.run("share", "--with", "carol@example.com", server: url)  // read-only by default
            try await carol.run(
                "accept",
                try await alice.run("share", "--url", server: url).trimmingCharacters(in: .whitespacesAndNewlines),
                server: url)

            let refused = try await carol.run(
                "delete", "--owner", "alice@example.com", "groceries", server: url, expecting: 1)
            #expect(
                refused.contains(
                    "carol-phone: could not delete groceries of alice@example.com: alice@example.com shares Notes with this user read-only (permissionFailure)\n"
                ),
                "\(refused)")
            #expect(
                refused.contains(
                    #"carol-phone: groceries of alice@example.com {title: "Groceries"} is back to the server's copy"#),
                "\(refused)")
            #expect(
                try await carol.run("show", server: url)
                    == "carol-phone: groceries of alice@example.com {title: \"Groceries\"}\n")
            #expect(try await alice.run("sync", server: url).contains(#"alice-phone: groceries {title: "Groceries"}"#))

            let stopped = try await alice.run("unshare", server: url)
            #expect(
                stopped.contains("alice-phone: deleted the share of Notes: no other user sees these notes now\n"),
                "\(stopped)")
            let noShare = try await alice.run("share", "--url", server: url, expecting: 1)
            #expect(noShare.contains("alice-phone knows no share of Notes"), "\(noShare)")
            let gone = try await carol.run("sync", server: url)
            #expect(
                gone.contains("carol-phone: alice@example.com no longer shares Notes with this user (zone deleted)"),
                "\(gone)")
            #expect(gone.hasSuffix("carol-phone: no notes\n"), "\(gone)")
        }
    }

    @Test(
        "F119 F124 F149 bob is removed and invited back before his laptop syncs: one fetch reports the zone deleted and modified, and the laptop keeps the notes fetched again"
    )
    func removedAndInvitedBack() async throws {
        try await Self.withAlicePhoneAndBobLaptop { url, alice, bob in
            try await alice.run("set", "groceries", "title", "Groceries", server: url)
            try await alice.run("share", "--with", "bob@example.com", "--permission", "read-write", server: url)
            let shareURL = try await alice.run("share", "--url", server: url).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let joined = try await bob.run("accept", shareURL, server: url)
            #expect(
                joined.contains(#"bob-laptop: fetched groceries of alice@example.com {title: "Groceries"}"#),
                "\(joined)")

            // Alice removes bob, writes another note, and invites bob back; bob's laptop has not
            // synced meanwhile. Bob accepts again: his shared database's feed lists the zone as
            // deleted (his removal) and as modified (his new acceptance) in one event.
            try await alice.run("unshare", "--remove", "bob@example.com", server: url)
            try await alice.run("set", "milk", "title", "Milk", server: url)
            try await alice.run("share", "--with", "bob@example.com", "--permission", "read-write", server: url)
            let again = try await bob.run("accept", shareURL, server: url)
            #expect(
                again.contains(
                    "bob-laptop: alice@example.com shares Notes with this user again (zone deleted meanwhile): fetching its notes anew\n"
                ),
                "\(again)")
            #expect(!again.contains("no longer shares Notes"), "\(again)")
            #expect(
                again.contains(#"bob-laptop: fetched groceries of alice@example.com {title: "Groceries"}"#), "\(again)")
            #expect(again.contains(#"bob-laptop: fetched milk of alice@example.com {title: "Milk"}"#), "\(again)")
            let ownerName = try #require(try Self.sharedOwners(of: bob).first)
            #expect(
                try Self.notes(of: bob, ownerName: ownerName) == [
                    "groceries": ["title": "Groceries"], "milk": ["title": "Milk"],
                ])
            // The acceptance is kept: bob still edits as read-write.
            let edited = try await bob.run(
                "set", "--owner", "alice@example.com", "milk", "body", "2 litres", server: url)
            #expect(edited.contains("bob-laptop: saved milk of alice@example.com"), "\(edited)")
        }
    }

    @Test(
        "F119 accepting an unknown or malformed share URL is refused with the URL named, and changes nothing; so is sharing with an unknown address"
    )
    func badShareURLs() async throws {
        try await Self.withAlicePhoneAndBobLaptop { url, alice, bob in
            try await bob.run("set", "todo", "title", "Mine", server: url)

            let unknown = "logsync://share/1/0123456789abcdef0123456789abcdef"
            for (shareURL, code) in [(unknown, "unknownItem"), ("https://example.com/not-a-share", "invalidArguments")]
            {
                let refused = try await bob.run("accept", shareURL, server: url, expecting: 1)
                #expect(refused.contains("bob-laptop: cannot accept \(shareURL): \(code)"), "\(refused)")
                #expect(refused.contains("nothing accepted"), "\(refused)")
            }
            #expect(try Self.sharedOwners(of: bob).isEmpty)
            #expect(try await bob.run("show", server: url) == "bob-laptop: todo {title: \"Mine\"}\n")

            try await alice.run("set", "groceries", "title", "Groceries", server: url)
            let stranger = try await alice.run("share", "--with", "dave@example.com", server: url, expecting: 1)
            #expect(
                stranger.contains("alice-phone: could not save the share of Notes: invalidArguments"), "\(stranger)")
            #expect(stranger.contains("dave@example.com"), "\(stranger)")
            let noURL = try await alice.run("share", "--url", server: url, expecting: 1)
            #expect(noURL.contains("alice-phone knows no share of Notes"), "\(noURL)")

            // The refused participant is not kept: sharing with bob saves a share of bob's alone.
            let toBob = try await alice.run("share", "--with", "bob@example.com", server: url)
            #expect(
                toBob.contains("alice-phone: saved the share of Notes: bob@example.com read-only pending\n"), "\(toBob)"
            )
        }
    }
}
