import Foundation
import LogStore
import LogSync
import LogSyncServer
import ModelEntries
import SyncModel

extension ServerSide {
    /// Opens the server's side at `path` read-only: a server extract (`NAME.lsb`, with a log
    /// `bundle` whose entry 1 is its manifest) or a server user's own directory
    /// (`DATA/users/uN`), and chooses its log: `log` if given, else the one named after `scope`
    /// (`private`, `shared`).
    ///
    /// - Parameters:
    ///   - path: The extract's or the server user's directory.
    ///   - scope: The device's database scope, which names the log (unless `requested` is given).
    ///   - requested: The log to read (`--server-log`), or `nil` for the one named after `scope`.
    ///   - keyID: The device bundle's key ID, if the device log is a bundle: an extract made with
    ///     another key (another user's, or another bundle's) is refused.
    ///   - redacted: Whether the device bundle's values or names are redacted: a server user's
    ///     own log, in clear, is then refused (its records would never equal the bundle's).
    /// - Throws: ``DiagnosticsError`` `serverSideMismatch` for a key that differs, a device
    ///   bundle given as the server's side, or a log that is not there; `unreadableLog` or
    ///   `corruptEntry` for a directory that does not open or a damaged file.
    public static func open(
        at path: String, scope: DatabaseScope, log requested: String? = nil, keyID: String? = nil,
        redacted: Bool = false
    ) throws(DiagnosticsError) -> ServerSide {
        let environment: LogEnvironment
        let names: [String]
        do throws(LogStoreError) {
            environment = try LogEnvironment.open(at: URL(fileURLWithPath: path), options: .init(readOnly: true))
            names = try environment.logNames()
        } catch {
            throw DiagnosticsError(
                error.code == .corruptEntry ? .corruptEntry : .unreadableLog,
                "the server's side at \(path) does not open: \(error)", logError: error)
        }
        let name = requested ?? scope.description
        var baseOffset: UInt64 = 0
        if names.contains("bundle") {
            let manifest = try extractManifest(at: path)
            if let keyID, manifest.keyID != keyID {
                throw DiagnosticsError(
                    .serverSideMismatch,
                    "the server extract at \(path) was made with the key \(manifest.keyID), the bundle with \(keyID): another user's extract, or one made for another bundle"
                )
            }
            baseOffset = manifest.scopes[name]?.baseOffset ?? 0
        } else if redacted {
            // A server user's log is in clear, and its records would never equal the bundle's:
            // the extract (`logsync-server export-log --bundle`) redacts it with the bundle's key.
            throw DiagnosticsError(
                .serverSideMismatch,
                "the bundle is redacted but the server's side at \(path) is a server user's log in clear: give an extract made with the bundle's key (logsync-server export-log --bundle), or a bundle exported in clear"
            )
        }
        guard names.contains(name) else {
            throw DiagnosticsError(
                .serverSideMismatch,
                "the server's side at \(path) holds no log \"\(name)\" (it holds \(names.sorted().joined(separator: ", ")))"
            )
        }
        do {
            return ServerSide(log: try environment.openLog(named: name), baseOffset: baseOffset)
        } catch {
            throw DiagnosticsError(.unreadableLog, "the log \"\(name)\" at \(path) does not open: \(error)")
        }
    }

    /// The manifest of the server extract at `path` (`ServerExtract.manifest(at:)`).
    private static func extractManifest(at path: String) throws(DiagnosticsError) -> ServerExtract.Manifest {
        let url = URL(fileURLWithPath: path)
        do {
            return try ServerExtract.manifest(at: url)
        } catch {
            if error.code == .corrupt {
                throw DiagnosticsError(
                    .corruptEntry, "the manifest of the server extract \(path) does not read: \(error)")
            }
            let manifestEntry = try? SupportBundleLayout.manifestEntry(
                in: LogEnvironment.open(at: url, options: .init(readOnly: true)))
            let isDeviceBundle = manifestEntry?.kind == SupportBundle.manifestKind
            throw DiagnosticsError(
                .serverSideMismatch,
                isDeviceBundle
                    ? "\(path) is a device's support bundle, not the server's side"
                    : "\(path) is not a server extract: \(error.message)")
        }
    }
}
