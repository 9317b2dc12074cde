import Foundation
import LogSync
import LogSyncServer

// Two devices of one user sync a note through a server embedded in this process. Both edit the
// note before fetching; the second send conflicts, its delegate merges, and the devices converge.
let directory = FileManager.default.temporaryDirectory.appending(path: "two-devices-\(UUID().uuidString.prefix(8))")
if CommandLine.arguments.contains("--automatic") {
    try await runAutomatically(in: directory)  // the same story, with no sendChanges or fetchChanges
    exit(0)
}
let server = try SyncServer(.init(directory: directory.appending(path: "server")))
let phone = try Device("phone", server: server, directory: directory)
let laptop = try Device("laptop", server: server, directory: directory)
let groceries = Record.ID(recordName: "groceries", zoneID: RecordZone.ID(zoneName: "Notes"))

heading("The phone creates a note; the laptop fetches it")
try phone.engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: groceries.zoneID))])
try phone.edit(groceries, "title", "Groceries")
try phone.edit(groceries, "body", "milk")
try await phone.engine.sendChanges()
try await laptop.engine.fetchChanges()

heading("Both edit the note before fetching; the phone sends first, then the laptop")
try phone.edit(groceries, "title", "Weekend groceries")
try laptop.edit(groceries, "body", "milk, eggs")
try await phone.engine.sendChanges()
do {
    try await laptop.engine.sendChanges()  // refused: the delegate merges and queues the merge
} catch let error as SyncError {
    say("laptop", "sendChanges() threw \(error.code), with \(error.partialErrors.values.map(\.code))")
}

heading("The laptop sends the merge; the phone fetches it")
try await laptop.engine.sendChanges()
try await phone.engine.fetchChanges()
show(phone, groceries)
show(laptop, groceries)
try await showLogs([phone, laptop], server: server)
