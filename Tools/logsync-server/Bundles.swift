import ArgumentParser
import Foundation
import LogSyncHTTP
import LogSyncServer
import LogSyncWire
import Logging
import SyncModel

/// `logsync-server bundles list|get`: the support bundles users uploaded, read by the operator
/// with the admin token from a running server (Docs/Deployment.md, "Support bundles").
struct Bundles: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List or download the support bundles users uploaded (admin routes /v1/admin/bundles).",
        discussion: """
            Only the operator reads uploaded bundles: these ask a running server with the admin \
            token. Bundles older than the server's --bundle-retention-days are removed by the \
            server itself (at start, then hourly). Docs/Deployment.md, "Support bundles".
            """,
        subcommands: [List.self, Get.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the stored support bundles, oldest first (GET /v1/admin/bundles).")

        @OptionGroup var connection: AdminConnection

        @Option(name: .long, help: ArgumentHelp("Only this user's bundles.", valueName: "user"))
        var user: String?

        @Flag(name: .long, help: "Print the list as JSON.")
        var json = false

        func run() async throws {
            let bundles: [WireBundles.Bundle]
            do {
                bundles = try await connection.client().supportBundles(of: user)
            } catch let error as SyncError {
                FileHandle.standardError.write(
                    Data("logsync-server bundles list: \(error.code): \(error.message)\n".utf8))
                throw ExitCode.failure
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(WireBundles.Bundles(bundles: bundles)), as: UTF8.self))
            } else {
                print(Self.table(bundles), terminator: "")
            }
        }

        /// One line per bundle, under a header.
        static func table(_ bundles: [WireBundles.Bundle]) -> String {
            let dates = ISO8601DateFormatter()
            var rows = [["ID", "USER", "UPLOADED", "BYTES", "APP", "LIBRARY", "KEY ID", "OFFSETS"]]
            for bundle in bundles {
                rows.append([
                    bundle.id, bundle.user, dates.string(from: bundle.uploaded), "\(bundle.size)",
                    bundle.appVersion ?? "-", bundle.libraryVersion, bundle.keyID,
                    "\(bundle.firstOffset)-\(bundle.lastOffset)",
                ])
            }
            let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
            return rows.map { row in
                zip(row, widths).map { cell, width in cell.padding(toLength: width, withPad: " ", startingAt: 0) }
                    .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
            }.joined()
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download a stored support bundle into a new bundle directory (GET /v1/admin/bundles/{id}).",
            discussion: "The directory then opens with logtool, as the device exported it: `logtool dump DIR.lsb`.")

        @OptionGroup var connection: AdminConnection

        @Argument(help: ArgumentHelp("The bundle's ID, as `bundles list` prints it.", valueName: "id"))
        var id: String

        @Option(
            name: .long,
            help: ArgumentHelp(
                "The bundle directory to write (NAME.lsb); it must not hold a data.mdb.", valueName: "dir"))
        var output: String

        func run() async throws {
            do {
                let size = try await connection.client().downloadSupportBundle(
                    id, to: URL(fileURLWithPath: output, isDirectory: true))
                print("\(output): \(size) bytes")
            } catch let error as SyncError {
                FileHandle.standardError.write(
                    Data("logsync-server bundles get: \(error.code): \(error.message)\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    /// Removes expired bundles now, then every `interval` seconds until cancelled, logging what
    /// each pass removed and any failure (the next pass tries again).
    static func sweepPeriodically(_ server: SyncServer, every interval: Double, logger: Logger) async {
        while !Task.isCancelled {
            do {
                let removed = try await server.removeExpiredSupportBundles()
                for bundle in removed {
                    logger.info(
                        "support bundle expired and removed",
                        metadata: ["bundle": "\(bundle.id)", "user": "\(bundle.user)"])
                }
            } catch {
                logger.error("removing expired support bundles failed", metadata: ["error": "\(error)"])
            }
            do {
                try await Task.sleep(for: .seconds(interval))
            } catch {
                return
            }
        }
    }
}
