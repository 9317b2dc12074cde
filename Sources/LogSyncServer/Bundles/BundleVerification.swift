import Foundation
import LogStore
import ModelEntries
import SyncModel

/// The check an uploaded support bundle passes before it is stored (Docs/Protocol.md,
/// "Support bundles"): its `data.mdb` opened read-only with LogStore's structural check of every
/// page, its log `bundle` holding at offset 1 a manifest entry (kind 1) that decodes, in a format
/// this server knows, and every entry of its log `device` read with its checksum, through the
/// last offset its manifest names. The server modules do not link the engine, so the manifest is
/// read here with LogStore directly, as `SupportBundle.manifest(at:)` reads it.
enum BundleVerification {
    /// The name of the log holding the manifest, and of the device's.
    static let manifestLog = SupportBundleLayout.manifestLogName
    static let deviceLog = "device"
    /// The manifest's entry kind and the formats this server reads.
    static let manifestKind = SupportBundleLayout.deviceManifestKind
    static let formatVersions = 1...1

    /// The parts of the manifest the server keeps.
    struct Manifest: Decodable {
        var formatVersion: Int
        var appVersion: String?
        var libraryVersion: String
        var created: Date
        var configuration: [String: String]
        var firstOffset: UInt64
        var lastOffset: UInt64
        var baseOffset: UInt64
        var keyID: String
    }

    /// Verifies the bundle in `directory` (its `data.mdb`); `id` names it in errors.
    ///
    /// - Throws: `SyncError` `invalidArguments` naming the part (the file's page, the manifest,
    ///   the log and offset) that is damaged or missing.
    static func verify(_ directory: URL, id: String) throws(SyncError) -> Manifest {
        let what = "support bundle \(id.prefix(16))"
        do {
            let environment = try LogEnvironment.open(
                at: directory, options: .init(readOnly: true, structureCheck: .everyPage))
            guard try environment.logNames().contains(deviceLog) else {
                throw SyncError(.invalidArguments, "\(what) holds no log \"\(deviceLog)\": not a support bundle")
            }
            guard let entry = try SupportBundleLayout.manifestEntry(in: environment), entry.kind == manifestKind else {
                throw SyncError(
                    .invalidArguments, "\(what) has no manifest (kind 1) at offset 1 of log \"\(manifestLog)\"")
            }
            let manifest: Manifest
            do {
                manifest = try SupportBundleLayout.decodeManifest(Manifest.self, from: entry.payload)
            } catch {
                throw SyncError(
                    .invalidArguments, "the manifest of \(what) (offset 1 of log \"\(manifestLog)\") does not decode",
                    cause: "\(error)")
            }
            guard formatVersions.contains(manifest.formatVersion) else {
                throw SyncError(
                    .invalidArguments,
                    "the manifest of \(what) is in bundle format \(manifest.formatVersion); this server reads format \(formatVersions.upperBound)"
                )
            }
            let device = try environment.openLog(named: deviceLog)
            let expected = manifest.lastOffset == 0 ? 0 : manifest.lastOffset - manifest.baseOffset
            var cursor = try device.entries()
            var last: UInt64 = 0
            while let entry = try cursor.next() { last = entry.offset.rawValue }
            guard last == expected else {
                throw SyncError(
                    .invalidArguments,
                    "\(what): log \"\(deviceLog)\" ends at offset \(last), but its manifest names \(expected) (device offset \(manifest.lastOffset))"
                )
            }
            return manifest
        } catch let error as SyncError {
            throw error
        } catch let error as LogStoreError {
            var parts: [String] = []
            if let page = error.page { parts.append("page \(page) of data.mdb") }
            if let log = error.log { parts.append("log \"\(log)\"") }
            if let offset = error.offset { parts.append("offset \(offset.rawValue)") }
            let part = parts.isEmpty ? "" : " at " + parts.joined(separator: ", ")
            throw SyncError(.invalidArguments, "\(what) is damaged\(part): \(error.message)", cause: "\(error)")
        } catch {
            throw SyncError(.invalidArguments, "\(what) cannot be read", cause: "\(error)")
        }
    }
}
