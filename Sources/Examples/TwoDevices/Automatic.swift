import Foundation
import LogSync
import LogSyncServer

// The same story with automatic sync (the default): the app only edits its notes. Each engine
// sends after a one-second debounce and fetches when the server's push hint arrives. The
// laptop is offline (a phone in a tunnel would be) while both edit: back online, it sends its
// stale edit, the server refuses it, and its delegate merges and queues the merge, which the
// engine sends on its own.
func runAutomatically(in directory: URL) async throws {
    let server = try SyncServer(.init(directory: directory.appending(path: "server")))
    // The laptop's network, which the story turns off and on. A real app would pass a provider
    // fed by its platform's reachability and power notifications.
    let network = ManualConditions()
    let phone = try Device("phone", server: server, directory: directory, automatic: true)
    let laptop = try Device("laptop", server: server, directory: directory, automatic: true, conditions: network)
    let groceries = Record.ID(recordName: "groceries", zoneID: RecordZone.ID(zoneName: "Notes"))
    func note(_ device: Device) -> [String: String] { device.app.notes.withLock { $0[groceries] } ?? [:] }

    heading("Automatic sync: the phone creates a note; nobody calls sendChanges or fetchChanges")
    try phone.engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: groceries.zoneID))])
    try phone.edit(groceries, "title", "Groceries")
    try await waitUntil("the laptop has the note") { note(laptop)["title"] == "Groceries" }
    try await waitUntilIdle(laptop)  // and has fetched all there was: no fetch is left to run

    heading("The laptop goes offline; both edit the note, and the phone's edit reaches the server")
    network.conditions.networkAvailable = false
    say("laptop", "goes offline")
    // The laptop edits first, so its send is due before the fetch the phone's push hint asks for.
    try laptop.edit(groceries, "body", "milk, eggs")
    try phone.edit(groceries, "title", "Weekend groceries")
    try await waitUntil("the server has the phone's edit") { phone.app.unsaved.withLock { $0[groceries] } == nil }

    heading("The laptop is back online; the engines send, conflict, merge and fetch on their own")
    network.conditions.networkAvailable = true
    say("laptop", "is back online")
    // With --buggy-merge the laptop's stale title wins (the bug Docs/Debugging.md chases).
    let title = Notes.buggyMerge ? "Groceries" : "Weekend groceries"
    try await waitUntil(Notes.buggyMerge ? "both devices hold the same note" : "both devices hold both edits") {
        let expected = ["title": title, "body": "milk, eggs"]
        return note(phone) == expected && note(laptop) == expected
    }
    show(phone, groceries)
    show(laptop, groceries)
    try await showLogs([phone, laptop], server: server)
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
