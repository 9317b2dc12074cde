import Foundation
import LogSync
import LogToolCore
import SyncModel

/// A record or zone name as a support bundle holds it: a bundle that hashes names (its manifest's
/// `hashNames`) names `groceries` as `h-…`, so a name given in clear to `--record` or `--zone`
/// is hashed with the bundle's own key (the manifest holds it) before it is looked for. A name
/// already hashed (`h-…`), a log that is not a bundle, or a bundle with names in clear: the
/// name as given.
///
/// - Parameters:
///   - name: The name on the command line, if any.
///   - paths: The logs given: the first device bundle among them hashes the name (a server
///     extract holds no key; a damaged bundle is reported by the reader that opens it).
func nameAsHeld(_ name: String?, inLogsAt paths: [String]) throws -> String? {
    guard let name, !name.hasPrefix("h-") else { return name }
    guard
        let (path, manifest) = paths.lazy.compactMap({ path in
            (try? SupportBundle.manifest(at: URL(fileURLWithPath: path))).map { (path, $0) }
        }).first, manifest.hashNames
    else { return name }
    guard let key = Data(base64Encoded: manifest.key), key.count == 32 else {
        throw LogToolError("the manifest of \(path) holds no usable key to hash \(name) with")
    }
    return Redactor(settings: .init(hashNames: true), key: Array(key)).name(name)
}
