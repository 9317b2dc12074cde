import Foundation

extension SyncEngine {
    /// Writes a support bundle of this engine's device log at `directory` (a new directory):
    /// the log's entries (whole or a range), redacted by default, under their offsets, with a
    /// manifest of the app's and library's versions, the engine's configuration (never keys,
    /// tokens or paths) and the redaction's settings and key (Docs/Privacy.md).
    ///
    /// Entries are read, redacted and written in chunks: memory stays flat whatever the log's
    /// length. The engine may keep syncing meanwhile; the bundle holds the log as it was when
    /// the export read its last offset.
    ///
    /// ```swift
    /// let summary = try engine.exportSupportBundle(
    ///     to: caches.appending(path: "report.lsb"),
    ///     options: .init(keepInClear: ["title"], appVersion: "2.3 (118)"))
    /// ```
    ///
    /// - Throws: ``SupportBundleError``: `.corruptSource` naming the offset of an entry that
    ///   does not read or decode (nothing is left behind), `.destinationExists`,
    ///   `.invalidRange`, `.io`.
    @discardableResult
    public func exportSupportBundle(
        to directory: URL, options: SupportBundle.Options = .init()
    ) throws(SupportBundleError) -> SupportBundle.Summary {
        var configuration = [
            "automaticallySync": String(automaticallySync),
            "environment": environment.rawValue,
            "database": database.databaseScope.description,
        ]
        if let subscriptionID { configuration["subscriptionID"] = subscriptionID.rawValue }
        try SupportBundle.export(deviceLog.log, to: directory, options: options, configuration: configuration)
        let manifest = try SupportBundle.manifest(at: directory)
        return SupportBundle.Summary(
            directory: directory, manifest: manifest,
            entryCount: manifest.lastOffset == 0 ? 0 : manifest.lastOffset - manifest.firstOffset + 1)
    }
}
