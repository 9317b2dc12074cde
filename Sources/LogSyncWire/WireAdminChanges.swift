import Foundation
import SyncModel

/// The admin change stream's routes and lines (Docs/Protocol.md, "Admin change stream"): the
/// app's backend, with an admin token, reads any user's database as that user's devices do, and
/// follows which databases change on the whole server.
///
/// - `POST /v1/admin/databases/{user}/{scope}/{operation}`: one of the read operations
///   (``readOperations``) on `user`'s database, with the bodies, formats and tokens of the
///   device route `POST /v1/databases/{scope}/{operation}`. The user ID is percent-encoded.
/// - `GET /v1/admin/changes`: a stream of JSON lines (``Line``), never ending by itself: first
///   one line per database that holds anything, with its current token, then `{"caughtUp":true}`,
///   then one line per database each time it changes (coalesced while the reader is behind).
public enum WireAdminChanges {
    /// `GET /v1/admin/changes`.
    public static var changesPath: String { "/\(WireProtocol.versionPath)/admin/changes" }

    /// The media type of the stream: one JSON object per line.
    public static let mediaType = "application/x-ndjson"

    /// The operations the admin routes run on a user's database: reads only.
    public static let readOperations: [WireOperation] = [.fetchDatabaseChanges, .fetchZoneChanges, .fetchZones]

    /// The path of a read of `user`'s database, such as
    /// `/v1/admin/databases/alice/private/fetchZoneChanges`, the user ID percent-encoded.
    public static func databasePath(user: String, scope: DatabaseScope, operation: WireOperation) -> String {
        "/\(WireProtocol.versionPath)/admin/databases/\(percentEncoded(user))/\(WireProtocol.scopeName(scope))/\(operation.rawValue)"
    }

    /// `text` with every byte but the unreserved ones (letters, digits, `-._~`) percent-encoded.
    public static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// One line of the stream: a database and its token, or the mark that the catalogue ended.
    public struct Line: Codable, Sendable, Hashable {
        /// The user whose database changed.
        public var user: String?
        /// `private`, `shared` or `public`.
        public var scope: String?
        /// The database's change token after the change, in base64 (`DatabaseChangeToken.data`):
        /// a reader whose saved token for the database equals it has nothing to fetch.
        public var token: String?
        /// `true` on the line after the catalogue: every database that held anything when the
        /// stream began has been named.
        public var caughtUp: Bool?

        public init(user: String? = nil, scope: String? = nil, token: String? = nil, caughtUp: Bool? = nil) {
            self.user = user
            self.scope = scope
            self.token = token
            self.caughtUp = caughtUp
        }

        /// The line of a database at `token`.
        public init(user: String, scope: DatabaseScope, token: DatabaseChangeToken) {
            self.init(user: user, scope: WireProtocol.scopeName(scope), token: token.data.base64EncodedString())
        }

        /// The line as the stream sends it: compact JSON and a newline.
        public var encoded: [UInt8] {
            WireSessions.encode(self) + [0x0A]
        }
    }
}
