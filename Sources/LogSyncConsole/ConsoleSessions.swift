import Foundation
import LogSyncServer
import LogSyncWire
import Synchronization

/// The console's browser sign-ins, kept in memory: one-time codes (`POST
/// /v1/admin/console-links`, used once within ``codeLifetime``) and the opaque sessions their
/// use opens, held by an HttpOnly cookie until ``sessionLifetime``. A restart ends them all.
///
/// Only digests are kept: a memory dump shows no usable code or session. At most ``maxEntries``
/// of each are kept; the oldest go first.
final class ConsoleSessions: Sendable {
    /// How long a link's code may be used.
    static let codeLifetime: TimeInterval = 60
    /// How long a console session lasts.
    static let sessionLifetime: TimeInterval = 8 * 3600
    /// The most codes, and the most sessions, kept at once.
    static let maxEntries = 1_000

    private let now: @Sendable () -> Date
    private let codes = Mutex<[String: Date]>([:])
    private let sessions = Mutex<[String: Date]>([:])

    init(now: @escaping @Sendable () -> Date) {
        self.now = now
    }

    /// A new code, usable once within ``codeLifetime``: 256 random bits in base64url.
    func newCode() -> String {
        let code = Self.random()
        Self.insert(Self.digest(code), expiring: now().addingTimeInterval(Self.codeLifetime), into: codes, now: now())
        return code
    }

    /// Uses `code`: a new session's secret when it is a code not used before and not expired,
    /// `nil` otherwise.
    func redeem(_ code: String) -> String? {
        let time = now()
        guard let expires = codes.withLock({ $0.removeValue(forKey: Self.digest(code)) }), expires > time else {
            return nil
        }
        let session = Self.random()
        Self.insert(
            Self.digest(session), expiring: time.addingTimeInterval(Self.sessionLifetime), into: sessions, now: time)
        return session
    }

    /// Whether `session` is a console session not expired.
    func accepts(session: String) -> Bool {
        let time = now()
        return sessions.withLock { $0[Self.digest(session)].map { $0 > time } ?? false }
    }

    private static func insert(_ key: String, expiring: Date, into table: borrowing Mutex<[String: Date]>, now: Date) {
        table.withLock { table in
            table = table.filter { $0.value > now }
            while table.count >= maxEntries, let oldest = table.min(by: { $0.value < $1.value }) {
                table[oldest.key] = nil
            }
            table[key] = expiring
        }
    }

    /// 256 random bits in base64url (LogSyncWire's, as bearer tokens are made).
    private static func random() -> String { randomBase64URL(bytes: 32) }

    /// What is kept of a code or a session: its SHA-256, as bearer tokens' digests are written.
    private static func digest(_ secret: String) -> String { SessionStore.digest(secret) }
}
