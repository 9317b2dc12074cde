import Foundation
import LogSyncServer
import SyncModel
import Testing

// The fixture language of sharing: an owner's device shares a zone, participants accept and
// use it from their shared databases.
//
//     try await withSharedNotes(harness, [("bob", .readWrite)]) { notes in
//         let bob = notes.participants["bob"]!
//         try await bob.save(newRecord(notes.recordID("n2"), ["title": "from bob"]))
//         #expect(try await notes.alice.fetchRecord(recordID("n2"))?["title"] == "from bob")
//     }

extension Device {
    /// The device's sharing operations: its database's, reached without a cast; every harness's
    /// databases implement them (``ShareOperations``).
    var sharing: any CloudDatabase {
        get throws {
            guard database is any ShareOperations else {
                throw ContractFailure("\(database) does not implement sharing")
            }
            return database
        }
    }

    /// The user record name of this device's user (`_user<N>`).
    func userRecordName() async throws -> String {
        try await database.currentUserRecordID().recordName
    }

    /// Saves `share`, which must succeed; returns it as the server keeps it.
    @discardableResult
    func saveShare(_ share: Share, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Share {
        let saved = try await save(share.record, sourceLocation: sourceLocation)
        return try Share(record: saved)
    }

    /// Accepts the share at `url`, which must succeed; returns the share as a participant sees it.
    @discardableResult
    func accept(_ url: URL, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Share {
        let response = try await sharing.acceptShares(AcceptSharesRequest(shareURLs: [url]))
        return try requireSuccess(response.results[url], "accepting \(url)", sourceLocation: sourceLocation)
    }

    /// The outcome of accepting the share at `url`.
    func attemptAccept(_ url: URL) async throws -> Result<Share, SyncError>? {
        try await sharing.acceptShares(AcceptSharesRequest(shareURLs: [url])).results[url]
    }
}

/// A zone "Notes" of alice's, with record "n1", shared whole with participants who accepted.
struct SharedNotes {
    let server: TestServer
    /// Alice's phone, on her private database.
    let alice: Device
    /// Each participant's device on their shared database, by user.
    let participants: [UserID: Device]
    /// The share as alice's phone saved it last.
    var share: Share
    /// Alice's user record name, the owner name of the zone as participants see it.
    let ownerName: String

    /// The shared zone as participants name it (F120).
    var zoneID: RecordZone.ID { RecordZone.ID(zoneName: "Notes", ownerName: ownerName) }

    /// A record of the shared zone, as participants name it.
    func recordID(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: zoneID) }

    /// The share's URL.
    var url: URL { share.url! }

    /// The share record as participants name it.
    var shareID: Record.ID { Record.ID(recordName: Share.zoneWideShareRecordName, zoneID: zoneID) }
}

/// Starts a server where alice shares her zone "Notes" (holding "n1") whole with each of
/// `participants` (registered with the e-mail address `<user>@example.com` and invited by it),
/// each of whom has accepted, then runs `body`.
func withSharedNotes(
    _ harness: any ContractHarness, _ participants: [(UserID, Share.Participant.Permission)],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (SharedNotes) async throws -> Void
) async throws {
    try await withServer(harness) { server in
        let alice = try await server.device("alice", "phone")
        try await alice.createZone("Notes", sourceLocation: sourceLocation)
        try await alice.save(newRecord("n1", ["title": "Groceries"]), sourceLocation: sourceLocation)
        var share = Share(recordZoneID: zoneID("Notes"))
        for (user, permission) in participants {
            try server.admin.registerUser(user, emailAddress: "\(user.rawValue)@example.com")
            share.addParticipant(
                Share.Participant(emailAddress: "\(user.rawValue)@example.com", permission: permission))
        }
        let saved = try await alice.saveShare(share, sourceLocation: sourceLocation)
        var devices: [UserID: Device] = [:]
        for (user, _) in participants {
            let device = try await server.device(user, DeviceID("\(user.rawValue)-phone"), scope: .shared)
            try await device.accept(
                try #require(saved.url, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
            devices[user] = device
        }
        let current = try await alice.fetchRecord(saved.recordID).map { try Share(record: $0) } ?? saved
        try await body(
            SharedNotes(
                server: server, alice: alice, participants: devices, share: current,
                ownerName: try await alice.userRecordName()))
    }
}

/// Alice's zone "Notes" holding record hierarchies (each record named with its parent), and
/// hierarchy shares of some of them, each with participants who accepted it.
struct SharedFolders {
    let server: TestServer
    /// Alice's phone, on her private database.
    let alice: Device
    /// Each participant's device on their shared database, by user.
    let participants: [UserID: Device]
    /// Alice's user record name, the owner name of the zone as participants see it.
    let ownerName: String

    /// The shared zone as participants name it (F120).
    var zoneID: RecordZone.ID { RecordZone.ID(zoneName: "Notes", ownerName: ownerName) }

    /// A record of the shared zone, as participants name it.
    func recordID(_ name: String) -> Record.ID { Record.ID(recordName: name, zoneID: zoneID) }
}

/// A new record `name` of alice's "Notes" (or of `zone`, as a participant names it) under `parent`.
func child(_ name: String, of parent: String?, in zone: RecordZone.ID = zoneID("Notes")) -> Record {
    var record = newRecord(Record.ID(recordName: name, zoneID: zone), ["title": .string(name)])
    if let parent { record.parent = Record.Reference(recordID: Record.ID(recordName: parent, zoneID: zone)) }
    return record
}

/// Starts a server where alice saves `records` (`(name, parent)`, in order) in her zone "Notes",
/// then shares the hierarchy rooted at each of `shares`' roots (share record `<root>-share`) with
/// its participants (registered as `<user>@example.com`), each of whom accepts; runs `body`.
func withSharedFolders(
    _ harness: any ContractHarness, records: [(String, String?)],
    shares: [(root: String, participants: [(UserID, Share.Participant.Permission)])],
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (SharedFolders) async throws -> Void
) async throws {
    try await withServer(harness) { server in
        let alice = try await server.device("alice", "phone")
        try await alice.createZone("Notes", sourceLocation: sourceLocation)
        try await alice.save(records.map { child($0.0, of: $0.1) }, sourceLocation: sourceLocation)
        var devices: [UserID: Device] = [:]
        for (root, participants) in shares {
            var share = Share(rootRecordID: recordID(root), shareID: recordID("\(root)-share"))
            for (user, permission) in participants {
                if devices[user] == nil {
                    try server.admin.registerUser(user, emailAddress: "\(user.rawValue)@example.com")
                    devices[user] = try await server.device(user, DeviceID("\(user.rawValue)-phone"), scope: .shared)
                }
                share.addParticipant(
                    Share.Participant(emailAddress: "\(user.rawValue)@example.com", permission: permission))
            }
            let url = try #require(
                try await alice.saveShare(share, sourceLocation: sourceLocation).url, sourceLocation: sourceLocation)
            for (user, _) in participants { try await devices[user]!.accept(url, sourceLocation: sourceLocation) }
        }
        try await body(
            SharedFolders(
                server: server, alice: alice, participants: devices, ownerName: try await alice.userRecordName()))
    }
}
