import Foundation
import LogStore
import SyncModel

/// What a device's support bundle and a server's extract share (Docs/Privacy.md): the log that
/// holds each one's manifest, the kinds that tell them apart, and the redaction part of a
/// device bundle's manifest, which the server reads to hash alike.
package enum SupportBundleLayout {
    /// The log holding the manifest, entry 1.
    package static let manifestLogName = "bundle"
    /// The manifest's kind in a device's support bundle (`SupportBundle.Manifest`).
    package static let deviceManifestKind: EntryKind = 1
    /// The manifest's kind in a server's extract (`ServerExtract.Manifest`).
    package static let serverExtractManifestKind: EntryKind = 2

    /// The most entries an export (a device bundle, a server extract) holds in memory and writes
    /// per transaction.
    package static let chunkEntries = 4096
    /// The payload bytes after which an export writes its chunk, whatever its count: large
    /// entries keep memory flat too.
    package static let chunkBytes = 4 << 20

    /// Creates the log `bundle` in `directory` (a new environment, its map starting small) and
    /// writes `manifest` as its entry 1, of `kind`: JSON with sorted keys and ISO 8601 dates.
    /// Returns the log; the exported logs go into its environment.
    package static func writeManifest(_ manifest: some Encodable, kind: EntryKind, in directory: URL) throws -> Log {
        let log = try Log.open(
            at: directory, named: manifestLogName, options: LogEnvironment.Options(initialMapSize: 1 << 20))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        try log.append(NewEntry(kind: kind, payload: Array(try encoder.encode(manifest))))
        return log
    }

    /// Decodes a manifest's JSON as ``writeManifest(_:kind:in:)`` wrote it.
    package static func decodeManifest<Manifest: Decodable>(
        _ type: Manifest.Type, from payload: [UInt8]
    ) throws
        -> Manifest
    {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(payload))
    }

    /// Entry 1 of the environment's log `bundle`: a device bundle's or a server extract's
    /// manifest (its kind tells which), or `nil` when the environment holds no such log or the
    /// log is empty. The one reading of a manifest entry for every side.
    package static func manifestEntry(in environment: LogEnvironment) throws(LogStoreError) -> LogEntry? {
        guard try environment.logNames().contains(manifestLogName) else { return nil }
        return try environment.openLog(named: manifestLogName).entry(at: .first)
    }

    /// How a bundle was redacted, as its manifest's JSON says it: the fields of
    /// `SupportBundle.Manifest` that make its `Redactor` (the key only in a device bundle's).
    package struct Redaction: Sendable, Hashable, Codable {
        package var redactValues: Bool
        package var keepInClear: [String]
        package var hashNames: Bool
        package var keyID: String
        /// The key, base64; `nil` in a server extract, which never holds it.
        package var key: String?
        /// The engine's configuration (`database` names the scope it synced), in a device bundle.
        package var configuration: [String: String]?

        package init(settings: Redactor.Settings, keyID: String, key: String? = nil) {
            redactValues = settings.redactValues
            keepInClear = settings.keepInClear.sorted()
            hashNames = settings.hashNames
            self.keyID = keyID
            self.key = key
        }

        package var settings: Redactor.Settings {
            Redactor.Settings(redactValues: redactValues, keepInClear: Set(keepInClear), hashNames: hashNames)
        }

        /// Why a manifest makes no redactor.
        package struct Invalid: Error, Sendable {
            package var reason: String
        }

        /// The redactor the manifest's key and settings make, its key checked against `keyID`.
        ///
        /// - Throws: ``Invalid`` when the key is missing, is not 32 bytes of base64, or has
        ///   another ID than `keyID`.
        package func redactor() throws(Invalid) -> Redactor {
            guard let key else { throw Invalid(reason: "the manifest holds no key") }
            guard let bytes = Data(base64Encoded: key), bytes.count == 32 else {
                throw Invalid(reason: "the manifest's key is not 32 bytes of base64")
            }
            let redactor = Redactor(settings: settings, key: Array(bytes))
            guard redactor.keyID == keyID else {
                throw Invalid(reason: "the manifest's key has ID \(redactor.keyID), not the keyID \(keyID) it records")
            }
            return redactor
        }

        /// Decodes the redaction part of a manifest's JSON.
        package static func decode(_ json: [UInt8]) throws -> Redaction {
            try JSONDecoder().decode(Redaction.self, from: Data(json))
        }
    }
}
