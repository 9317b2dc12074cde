import ArgumentParser
import Foundation
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server sessions`: the devices signed in as sessions, as a user sees them over HTTP
/// (`GET /v1/devices`, `DELETE /v1/devices/{device}`), with the same code.
struct Sessions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List or sign out the devices signed in with an identity token.",
        subcommands: [List.self, Revoke.self])

    /// The store's sessions, and the storage to shut down after.
    static func open(_ data: DataOptions) throws -> (SessionStore, any ServerStorage) {
        let logger = Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() })
        let storage = try DataOptions.storage(data.location, connections: 1, logger: logger)
        let server = try SyncServer(
            SyncServer.Configuration(directory: URL(fileURLWithPath: NSTemporaryDirectory())), storage: storage)
        return (try SessionStore(server: server), storage)
    }

    /// `logsync-server sessions list --user U`.
    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List USER's signed-in devices, oldest sign-in first.",
            discussion: """
                One line per device, tab-separated: the device ID, when it signed in, when it last \
                refreshed its session (ISO 8601, UTC), and the name it gave itself.
                """)

        @OptionGroup var data: DataOptions
        @Option(help: ArgumentHelp("The user, as sessions name them (issuer:subject).", valueName: "user"))
        var user: String

        func run() throws {
            let lines = try exitingOnError { () -> [String] in
                let (sessions, storage) = try Sessions.open(data)
                defer { storage.shutdown() }
                let dates = ISO8601DateFormatter()
                return try sessions.sessions(of: UserID(user)).map { session in
                    [
                        session.device.rawValue, dates.string(from: session.created),
                        dates.string(from: session.refreshed), session.name,
                    ].joined(separator: "\t")
                }
            }
            for line in lines { print(line) }
        }
    }

    /// `logsync-server sessions revoke --user U [--device D]`.
    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign out USER's device DEVICE, or every device of USER.",
            discussion: """
                The sessions end: their tokens are refused and, on a PostgreSQL store, every node \
                closes their push channels at once. On an LMDB store, a running server refuses \
                them from its next request and closes their push channels within a quarter of a \
                second. Prints how many sessions ended.
                """)

        @OptionGroup var data: DataOptions
        @Option(help: ArgumentHelp("The user, as sessions name them (issuer:subject).", valueName: "user"))
        var user: String
        @Option(help: ArgumentHelp("The device to sign out; every device of the user without it.", valueName: "device"))
        var device: String?

        func run() throws {
            let count = try exitingOnError { () -> Int in
                let (sessions, storage) = try Sessions.open(data)
                defer { storage.shutdown() }
                if let device { return try sessions.revoke(user: UserID(user), device: DeviceID(device)) }
                return try sessions.revokeAll(of: UserID(user))
            }
            print(count == 1 ? "1 session revoked" : "\(count) sessions revoked")
        }
    }
}
