import Foundation
import LogSync
import LogSyncServer

// The example's output: a timeline, one line per step.

/// Prints a step of the timeline.
func heading(_ text: String) {
    print("\n== \(text)")
}

/// Prints what a device did, with the note concerned, if any.
func say(_ device: String, _ text: String, _ record: Record? = nil) {
    let note = record.map { " \($0.recordID.recordName) \(describe($0.stringFields))" } ?? ""
    print("  \(device.padding(toLength: 7, withPad: " ", startingAt: 0))\(text)\(note)")
}

/// Prints a device's copy of a note.
func show(_ device: Device, _ id: Record.ID) {
    let fields = device.app.notes.withLock { $0[id] } ?? [:]
    say(device.app.device, "has \(id.recordName) \(describe(fields))")
}

/// Prints where the logs are, and how to read them.
func showLogs(_ directory: URL, server: SyncServer) throws {
    print("\n== The logs")
    print("  Each device's log (the device log: its state and every step of its syncs):")
    for device in ["phone", "laptop"] {
        print("    swift run logtool dump \(directory.appending(path: device).path)")
    }
    print("  The server's log of alice's private database:")
    print("    swift run logtool dump \(try server.admin.log(of: "alice").environment.path) --log private")
}

/// `{body: "milk", title: "Groceries"}`.
func describe(_ fields: [String: String]) -> String {
    "{" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \"\($0.value)\"" }.joined(separator: ", ") + "}"
}

extension Record {
    /// The record's string fields.
    var stringFields: [String: String] {
        var fields: [String: String] = [:]
        for key in allKeys() {
            if case .string(let text)? = self[key] { fields[key] = text }
        }
        return fields
    }
}
