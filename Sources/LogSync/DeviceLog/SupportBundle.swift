import Foundation
import LogStore
import ModelEntries
import SyncModel

/// A support bundle: a device log exported for a developer, with the user's data redacted
/// (Docs/Privacy.md, "What a support bundle holds").
///
/// A bundle is a LogStore environment: its log `device` holds the exported entries, redacted,
/// under their original offsets (a range export from offset N records `baseOffset` N − 1 in
/// the manifest), with the device index, so every reader of a device log reads it; its log
/// `bundle` holds one entry, the ``Manifest``. Its one file of data is `data.mdb`
/// (`lock.mdb` holds no data and LMDB recreates it).
///
/// ```swift
/// let summary = try engine.exportSupportBundle(to: caches.appending(path: "report.lsb"))
/// let manifest = try SupportBundle.manifest(at: summary.directory)
/// ```
public enum SupportBundle {
    /// The name of the log that holds the manifest.
    public static let manifestLogName = SupportBundleLayout.manifestLogName
    /// The kind of the manifest's entry in the log `bundle`.
    public static let manifestKind: EntryKind = SupportBundleLayout.deviceManifestKind
    /// The bundle format this build writes and reads.
    public static let formatVersion = 1
    /// The library's version, as a bundle's manifest records it.
    public static let libraryVersion = "LogSync 0.1 (device log format 1)"

    /// What to export, and how to redact it.
    public struct Options: Sendable, Hashable {
        /// The entries to export: every one, or the offsets in a range.
        public enum Range: Sendable, Hashable {
            /// The whole log.
            case whole
            /// The entries `from...to`; `to` past the log's end stops at its end.
            case offsets(from: UInt64, to: UInt64)
        }

        /// The entries to export; the whole log by default.
        public var range: Range
        /// Replace each field value by its type, size and keyed hash; on by default.
        public var redactValues: Bool
        /// Fields whose values stay in clear (encrypted values never do).
        public var keepInClear: Set<String>
        /// Replace record, zone and owner names by their keyed hash; on by default.
        public var hashNames: Bool
        /// The app's version, recorded in the manifest.
        public var appVersion: String?

        /// - Parameters:
        ///   - range: the entries to export.
        ///   - redactValues: whether field values are redacted.
        ///   - keepInClear: fields kept in clear.
        ///   - hashNames: whether record, zone and owner names are hashed.
        ///   - appVersion: the app's version.
        public init(
            range: Range = .whole, redactValues: Bool = true, keepInClear: Set<String> = [], hashNames: Bool = true,
            appVersion: String? = nil
        ) {
            self.range = range
            self.redactValues = redactValues
            self.keepInClear = keepInClear
            self.hashNames = hashNames
            self.appVersion = appVersion
        }
    }

    /// What a bundle says of itself: the first and only entry of its log `bundle`, as JSON.
    public struct Manifest: Sendable, Hashable, Codable {
        /// The bundle format (``SupportBundle/formatVersion``).
        public var formatVersion: Int
        /// The app's version, if the app gave it.
        public var appVersion: String?
        /// The library's version.
        public var libraryVersion: String
        /// When the bundle was written.
        public var created: Date
        /// The engine's configuration, without keys, tokens or paths: `automaticallySync`,
        /// `subscriptionID`, `environment`, `database`.
        public var configuration: [String: String]
        /// The first and last offsets exported (0 and 0 for an empty log).
        public var firstOffset: UInt64
        /// The last offset exported.
        public var lastOffset: UInt64
        /// What to add to an offset of the bundle's log `device` to get the device log's offset:
        /// 0 unless the export began past offset 1.
        public var baseOffset: UInt64
        /// Whether field values are redacted.
        public var redactValues: Bool
        /// The fields kept in clear, sorted.
        public var keepInClear: [String]
        /// Whether record, zone and owner names are hashed.
        public var hashNames: Bool
        /// The first 8 bytes of SHA-256 of the hash key, in hex.
        public var keyID: String
        /// The hash key, base64: with it, the server's extract of the same user hashes alike
        /// (Docs/Privacy.md says what that means for a guessable value).
        public var key: String
    }

    /// What an export wrote.
    public struct Summary: Sendable, Hashable {
        /// The bundle's directory.
        public var directory: URL
        /// Its manifest.
        public var manifest: Manifest
        /// The number of entries exported.
        public var entryCount: UInt64
    }

    /// Writes a bundle of `log` at `directory`, which must not exist yet: its entries decoded,
    /// redacted and appended in chunks (`SupportBundleLayout.chunkEntries` and `chunkBytes`,
    /// read through the log's own chunked cursor), so memory stays flat whatever the log's length.
    ///
    /// - Throws: ``SupportBundleError``.
    package static func export(
        _ log: Log, to directory: URL, options: Options, configuration: [String: String]
    ) throws(SupportBundleError) {
        let path = directory.standardizedFileURL.path
        if FileManager.default.fileExists(atPath: path) {
            throw SupportBundleError(
                .destinationExists, "\(path) exists already; a bundle is written to a new directory")
        }
        let last: LogOffset
        do { last = try log.lastOffset } catch { throw SupportBundleError(source: error) }
        var first: UInt64 = 1
        var end = last.rawValue
        if case .offsets(let from, let to) = options.range {
            guard from >= 1, from <= to else {
                throw SupportBundleError(.invalidRange, "the range \(from)...\(to) names no entry; offsets start at 1")
            }
            guard from <= last.rawValue else {
                throw SupportBundleError(
                    .invalidRange, "the range starts at \(from), past the log's end at \(last.rawValue)")
            }
            first = from
            end = min(to, last.rawValue)
        }
        let redactor = Redactor(
            settings: .init(
                redactValues: options.redactValues, keepInClear: options.keepInClear, hashNames: options.hashNames))
        let manifest = Manifest(
            formatVersion: formatVersion, appVersion: options.appVersion, libraryVersion: libraryVersion,
            created: Date(),
            configuration: configuration, firstOffset: end == 0 ? 0 : first, lastOffset: end,
            baseOffset: end == 0 ? 0 : first - 1, redactValues: options.redactValues,
            keepInClear: options.keepInClear.sorted(), hashNames: options.hashNames, keyID: redactor.keyID,
            key: Data(redactor.key).base64EncodedString())
        do {
            try write(log, from: first, through: end, to: directory, redactor: redactor, manifest: manifest)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private static func write(
        _ log: Log, from first: UInt64, through end: UInt64, to directory: URL, redactor: Redactor, manifest: Manifest
    ) throws(SupportBundleError) {
        let bundle: Log
        do {
            let manifestLog = try SupportBundleLayout.writeManifest(manifest, kind: manifestKind, in: directory)
            bundle = try manifestLog.environment.openLog(named: DeviceLog.logName, projections: [DeviceIndex()])
        } catch {
            throw SupportBundleError(.io, "cannot write the bundle at \(directory.path): \(error)")
        }
        guard end >= first else { return }
        var cursor: EntryCursor
        do { cursor = try log.entries(from: LogOffset(first), through: LogOffset(end)) } catch {
            throw SupportBundleError(source: error)
        }
        var batch: [NewEntry] = []
        var batchBytes = 0
        batch.reserveCapacity(SupportBundleLayout.chunkEntries)
        var expected = first
        // The last batchPrepared written, at its offset in the bundle, its records redacted: a
        // batchSaved answering it is written against it again (kind 15 stays 15); one whose
        // batchPrepared is before the range is written whole (kind 12).
        var lastPrepared: PreparedBatchReference?
        while true {
            let entry: LogEntry?
            do throws(LogStoreError) { entry = try cursor.next() } catch {
                throw SupportBundleError(source: error, offset: expected)
            }
            if let entry {
                let decoded: DeviceEntry
                var preparedOffset: UInt64?
                do throws(LogStoreError) {
                    decoded = try DeviceEntry(entry, in: log)
                    if entry.kind == DeviceEntry.Kind.batchSaved {
                        preparedOffset = try DeviceEntry.BatchSavedOutline(entry).preparedOffset.rawValue
                    }
                } catch {
                    throw SupportBundleError(source: error, offset: entry.offset.rawValue)
                }
                let redactedEntry = decoded.redacted(with: redactor)
                let bundleOffset = LogOffset(entry.offset.rawValue - first + 1)
                var redacted: NewEntry
                if let preparedOffset, let prepared = lastPrepared, preparedOffset >= first,
                    prepared.offset.rawValue == preparedOffset - first + 1
                {
                    redacted = redactedEntry.decodedNewEntry(
                        preparedAt: prepared.offset, preparing: prepared.recordsToSave)
                } else {
                    redacted = redactedEntry.decodedNewEntry
                }
                if case .batchPrepared(let records, _, _, _) = redactedEntry {
                    lastPrepared = PreparedBatchReference(offset: bundleOffset, recordsToSave: records)
                }
                redacted.time = entry.time
                batchBytes += redacted.payload.count
                batch.append(redacted)
                expected = entry.offset.rawValue + 1
            }
            if batch.count == SupportBundleLayout.chunkEntries || batchBytes >= SupportBundleLayout.chunkBytes
                || (entry == nil && !batch.isEmpty)
            {
                do { try bundle.append(batch) } catch {
                    throw SupportBundleError(.io, "cannot write the bundle at \(directory.path): \(error)")
                }
                batch.removeAll(keepingCapacity: true)
                batchBytes = 0
            }
            if entry == nil { break }
        }
    }

    /// Reads the manifest of the bundle at `directory`, opening it read-only (every page checked).
    ///
    /// - Throws: ``SupportBundleError`` `.notABundle` for a log without a manifest or a manifest
    ///   that does not decode, `.corrupt` naming the page or offset for a damaged file.
    public static func manifest(at directory: URL) throws(SupportBundleError) -> Manifest {
        let payload: [UInt8]
        do {
            let environment = try LogEnvironment.open(at: directory, options: .init(readOnly: true))
            guard let entry = try SupportBundleLayout.manifestEntry(in: environment), entry.kind == manifestKind else {
                throw SupportBundleError(
                    .notABundle, "\(directory.path) has no manifest at offset 1 of log \"\(manifestLogName)\"")
            }
            payload = entry.payload
        } catch let error as SupportBundleError {
            throw error
        } catch let error as LogStoreError {
            throw SupportBundleError(bundle: error)
        } catch {
            throw SupportBundleError(.io, "cannot read \(directory.path): \(error)")
        }
        do { return try SupportBundleLayout.decodeManifest(Manifest.self, from: payload) } catch {
            throw SupportBundleError(.notABundle, "the manifest of \(directory.path) does not decode: \(error)")
        }
    }
}

/// Why an export or a bundle's read failed; names the offset (or the page) where known.
public struct SupportBundleError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The device log holds an entry that does not read or decode: nothing is exported.
        case corruptSource
        /// The bundle's file is damaged: truncated or tampered.
        case corrupt
        /// The directory is not a bundle (no manifest, or one that does not decode).
        case notABundle
        /// The destination exists already.
        case destinationExists
        /// The range names no entry of the log.
        case invalidRange
        /// Writing or reading files failed.
        case io
    }

    /// What went wrong.
    public var code: Code
    /// What, in words.
    public var message: String
    /// The device log's offset (for `.corruptSource`) or the bundle log's (for `.corrupt`), when known.
    public var offset: UInt64?
    /// The page of the bundle's file, for `.corrupt` found by the structural check.
    public var page: UInt64?

    /// - Parameters: see the properties.
    public init(_ code: Code, _ message: String, offset: UInt64? = nil, page: UInt64? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
        self.page = page
    }

    init(source error: any Error, offset: UInt64? = nil) {
        let at = (error as? LogStoreError)?.offset?.rawValue ?? offset
        self.init(.corruptSource, "the device log cannot be exported: \(error)", offset: at)
    }

    init(bundle error: LogStoreError) {
        switch error.code {
        case .corruptFile, .corruptEntry, .unknownFormatVersion:
            self.init(.corrupt, "the bundle is damaged: \(error)", offset: error.offset?.rawValue, page: error.page)
        case .notALog, .missingPath:
            self.init(.notABundle, "not a support bundle: \(error)")
        default:
            self.init(.io, "cannot read the bundle: \(error)")
        }
    }

    public var description: String {
        var text = "support bundle: \(code.rawValue)"
        if let offset { text += " at offset \(offset)" }
        if let page { text += " (page \(page))" }
        return text + ": " + message
    }
}
