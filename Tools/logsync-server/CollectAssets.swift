import ArgumentParser
import Foundation
import LogSyncServer
import Logging
import SyncModel

/// `logsync-server collect-assets`: deletes the asset contents no record has referenced for
/// longer than the horizon, and what interrupted uploads left (Docs/Protocol.md, "Assets").
struct CollectAssets: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collect-assets",
        abstract: "Delete asset contents no record references any more, and what interrupted uploads left.",
        discussion: """
            For every user: contents no live record has referenced for longer than --horizon are \
            logged as deleted and removed; contents stored by an upload whose server stopped \
            before logging it, and partial uploads not written to for longer than --horizon, are \
            removed. Nothing a record references is touched. `serve` does the same every \
            --asset-collection-interval; run this one from cron when that is 0, or on a stopped \
            server. Prints one line per user for whom anything was removed.
            """)

    @OptionGroup var data: DataOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long an unreferenced content or a partial upload is kept, in seconds (0: remove them all now).",
            valueName: "seconds"))
    var horizon = 7 * 86_400.0

    func validate() throws {
        guard horizon >= 0, horizon.isFinite else {
            throw ValidationError("--horizon must be a number of seconds, 0 or more")
        }
    }

    func run() async throws {
        let logger = Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() })
        let server: SyncServer
        do {
            (server, _) = try data.server(logger: logger)
        } catch {
            FileHandle.standardError.write(Data("logsync-server: \(error)\n".utf8))
            throw ExitCode.failure
        }
        defer { server.shutdown() }
        do {
            let collected = try await server.collectAssets(unreferencedBefore: Date().addingTimeInterval(-horizon))
            for (user, collection) in collected.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                print(Self.summary(user, collection))
            }
        } catch {
            FileHandle.standardError.write(Data("logsync-server: collecting assets failed: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    /// `alice: deleted 2, unlogged 0, partial 1`.
    static func summary(_ user: UserID, _ collection: AssetCollection) -> String {
        "\(user.rawValue): deleted \(collection.deleted.count), unlogged \(collection.orphansRemoved.count), partial \(collection.partialsRemoved.count)"
    }

    /// Collects every `interval` seconds until cancelled, logging what each pass removed and
    /// any failure (the next pass tries again).
    static func periodically(_ server: SyncServer, every interval: Double, horizon: Double, logger: Logger) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .seconds(interval))
            } catch {
                return
            }
            do {
                let collected = try await server.collectAssets(unreferencedBefore: Date().addingTimeInterval(-horizon))
                for (user, collection) in collected {
                    logger.info(
                        "assets collected",
                        metadata: [
                            "user": "\(user)", "deleted": "\(collection.deleted.count)",
                            "unlogged": "\(collection.orphansRemoved.count)",
                            "partial": "\(collection.partialsRemoved.count)",
                        ])
                }
            } catch {
                logger.error("collecting assets failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
