import ArgumentParser
import Foundation
import LogSyncPostgres
import LogSyncServer
import Logging

extension DataOptions {
    /// The store of `--store URL --cluster NAME=URL…`: the directory, named `main`, then each
    /// `--cluster` in the order given (the order placement's ties follow).
    static func partitioned(
        directory url: String, clusters: [String], connections: Int, logger: Logger
    ) throws -> PartitionedStorage {
        var parsed: [(name: String, url: String)] = [("main", url)]
        for text in clusters {
            guard let equals = text.firstIndex(of: "="), case let name = String(text[..<equals]),
                PostgresCluster.isValidName(name)
            else {
                throw ValidationError(
                    "--cluster must be NAME=postgres://… with a NAME of letters, digits, - and _, not \"\(text)\"")
            }
            guard !parsed.contains(where: { $0.name == name }) else {
                throw ValidationError(
                    name == "main"
                        ? "--cluster main: main is the --store database (the directory); name the other clusters otherwise"
                        : "--cluster \(name) is given twice")
            }
            let clusterURL = String(text[text.index(after: equals)...])
            guard case .postgres = try location(clusterURL, option: "--cluster \(name)") else {
                throw ValidationError("--cluster \(name) must name a PostgreSQL database (postgres://…)")
            }
            parsed.append((name, clusterURL))
        }
        var opened: [PostgresCluster] = []
        do {
            for (name, clusterURL) in parsed {
                opened.append(
                    PostgresCluster(
                        name: name,
                        storage: try PostgresStorage(url: clusterURL, connections: connections, logger: logger)))
            }
            return try PartitionedStorage(clusters: opened)
        } catch {
            for cluster in opened { cluster.storage.shutdown() }
            if let error = error as? ClusterError { throw ValidationError(error.description) }
            throw error
        }
    }
}

/// `logsync-server user move USER --to CLUSTER`: a user moved to another cluster while they
/// keep working.
struct MoveUser: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move",
        abstract: "Move USER's logs, asset contents and bundles to another PostgreSQL cluster, online.",
        discussion: """
            Needs the same --store (the directory) and --cluster options as the nodes. The user's \
            logs are copied entry by entry at the same offsets, so their devices keep their change \
            tokens, while they keep working; then the user is fenced on the old cluster for as \
            long as it takes to copy what came meanwhile (their requests get 503 with \
            Retry-After: 1 meanwhile), the directory switched, and the old rows deleted. A node \
            that still thinks the user is on the old cluster finds the fence there and goes to \
            the new one. If the move stops part way (a crash, a lost connection), the user is \
            on the old cluster, or already on the new one, with every acknowledged write; run \
            the same command again to finish it.

                logsync-server user move alice --to b --store postgres://…/directory --cluster b=postgres://…
            """)

    @Argument(help: ArgumentHelp("The user to move.", valueName: "user"))
    var user: String

    @Option(
        name: .long,
        help: ArgumentHelp("The cluster to move the user to (main, or a --cluster NAME).", valueName: "cluster"))
    var to: String

    @OptionGroup var data: DataOptions

    func validate() throws {
        guard !data.clusters.isEmpty else {
            throw ValidationError("user move needs the clusters: --cluster NAME=postgres://…")
        }
    }

    func run() throws {
        let report = try exitingOnError { () -> UserMove.Report in
            try UserID(user).validate()
            let logger = Logger(label: "logsync-server", factory: { _ in SwiftLogNoOpLogHandler() })
            guard case .postgres(let url) = try data.location else {
                throw ValidationError("user move needs --store postgres://…")
            }
            let storage = try DataOptions.partitioned(
                directory: url, clusters: data.clusters, connections: 2, logger: logger)
            defer { storage.shutdown() }
            guard let number = try UserMove.number(of: UserID(user), in: storage) else {
                throw ValidationError("user \"\(user)\" is not registered")
            }
            return try UserMove(storage: storage, user: number, to: to).run()
        }
        if report.from == report.to {
            print("user \"\(user)\" is on cluster \(report.to)")
        } else {
            print(
                "user \"\(user)\" moved from cluster \(report.from) to \(report.to): \(report.entries) entries, \(report.contents) asset contents, \(report.bundles) bundles copied"
            )
        }
    }
}
