import Foundation
import LogSync
import LogSyncServer

// The same story with automatic sync (the default): the app only edits its notes. Each engine
// sends after a one-second debounce, fetches when the server's push hint arrives, and the
// laptop's delegate merges the conflict and queues the merge, which the engine sends on its own.
func runAutomatically(in directory: URL) async throws {
    let server = try SyncServer(.init(directory: directory.appending(path: "server")))
    let phone = try Device("phone", server: server, directory: directory, automatic: true)
    let laptop = try Device("laptop", server: server, directory: directory, automatic: true)
    let groceries = Record.ID(recordName: "groceries", zoneID: RecordZone.ID(zoneName: "Notes"))
    func note(_ device: Device) -> [String: String] { device.app.notes.withLock { $0[groceries] } ?? [:] }

    heading("Automatic sync: the phone creates a note; nobody calls sendChanges or fetchChanges")
    try phone.engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: groceries.zoneID))])
    try phone.edit(groceries, "title", "Groceries")
    try await waitUntil("the laptop has the note") { note(laptop)["title"] == "Groceries" }

    heading("Both edit the note at once; the engines send, conflict, merge and fetch on their own")
    try phone.edit(groceries, "title", "Weekend groceries")
    try laptop.edit(groceries, "body", "milk, eggs")
    try await waitUntil("both devices hold both edits") {
        let expected = ["title": "Weekend groceries", "body": "milk, eggs"]
        return note(phone) == expected && note(laptop) == expected
    }
    show(phone, groceries)
    show(laptop, groceries)
    try showLogs(directory, server: server)
}

/// Waits (checking every 50 ms, for at most 30 s) until `condition` holds.
func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw ExampleTimeout(what: what) }
        try await Task.sleep(for: .milliseconds(50))
    }
    print("  (\(what))")
}

/// The example gave up waiting.
struct ExampleTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "gave up after 30 s waiting until \(what)" }
}
