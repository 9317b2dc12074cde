import Foundation
import LogSyncServer
import SyncModel
import Synchronization

/// Taking tokens away: from the file, the storage or memory, on every node, and from the push
/// channels opened with them.
extension TokenStore {
    /// Takes away the tokens `revocation` names: one token (`.credential` with its digest,
    /// `sha256:…`) or every token of a user. Requests with them get 401 from then on, exactly
    /// as with a token never given, and their push channels end. Returns how many tokens were
    /// taken away.
    ///
    /// - A file store rewrites its file without their lines (``revoke(_:inFile:)``) and reads it
    ///   at once; other servers on the file follow within their ``checkInterval``.
    /// - A storage's tokens are deleted there, and every node sharing the storage hears of it
    ///   (`StoredTokens/revoke(_:)`); this node takes effect at once.
    /// - A store in memory forgets them.
    ///
    /// - Throws: ``FileError`` for a token file that cannot be read or is malformed (it is not
    ///   edited then); the storage's error.
    @discardableResult
    public func revoke(_ revocation: Revocation) throws -> Int {
        if let stored {
            let count = try stored.revoke(revocation)
            forget(revocation)
            return count
        }
        if let file {
            let count = try Self.revoke(revocation, inFile: file)
            refreshIfChanged()
            return count
        }
        return forget(revocation)
    }

    /// The digest (`sha256:<64 lowercase hex digits>`, a token's credential name in a
    /// `Revocation`) of `text`, which is a token or a digest in either case; `nil` if it is
    /// neither.
    public static func digest(ofTokenOrDigest text: String) -> String? {
        if text.hasPrefix(TokenDigest.prefix) { return TokenDigest(text)?.description }
        guard (try? checkToken(text, path: "", line: 0)) != nil else { return nil }
        return TokenDigest(token: text).description
    }

    /// A stream that ends when `token` stops standing for `user` on this node: it is revoked,
    /// or gone from the file. A push channel serves until it ends. If the token may already be
    /// gone (this node does not know it from memory), it is checked at once, and the stream ends
    /// if it is gone or cannot be checked.
    ///
    /// A channel opened with a session's access token ends when the session is revoked (not
    /// when a refresh replaces the token, nor when the token expires).
    ///
    /// `end`, if given, says at once that the stream ended: its consumer learns it only when it
    /// next runs, and a push channel must not send a hint meanwhile (a node that heard
    /// revocations again ends the channels of revoked tokens before it tells devices to fetch).
    package func untilRevoked(token: String, user: UserID, end: ChannelEnd? = nil) -> AsyncStream<Void> {
        let digest = TokenDigest(token: token)
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        let isSession = isSessionToken(token)
        let (id, known, epoch) = state.withLock { state in
            state.nextChannel += 1
            let grant = isSession ? state.trustedGrant(of: digest) : nil
            state.channels[state.nextChannel] = Channel(
                digest: digest, user: user, isSession: isSession, session: grant?.session, revoked: continuation)
            let known = isSession ? grant?.user == user : state.trustedUser(of: digest, stored: stored != nil) == user
            return (state.nextChannel, known, state.epoch)
        }
        continuation.onTermination = { [weak self] _ in
            end?.markEnded()
            _ = self?.state.withLock { $0.channels.removeValue(forKey: id) }
        }
        if !known, isSession {
            // Which session the channel belongs to, from the store; a revocation heard meanwhile
            // might be the session's, so the channel ends then (the device opens it again).
            Thread.detachNewThread { [self] in
                guard case .session(let grant)? = try? authenticate(token), grant.user == user else {
                    endChannel(id)
                    return
                }
                let kept = state.withLock { state in
                    guard state.epoch == epoch, state.channels[id] != nil else { return false }
                    state.channels[id]?.session = grant.session
                    return true
                }
                if !kept { endChannel(id) }
            }
            return stream
        }
        if !known {
            guard stored != nil else {
                continuation.finish()
                return stream
            }
            Thread.detachNewThread { [self] in
                if (try? lookUp(token)) != user { endChannel(id) }
            }
        }
        return stream
    }

    /// Ends the push channel `id`.
    private func endChannel(_ id: Int) {
        state.withLock { $0.channels.removeValue(forKey: id) }?.revoked.finish()
    }

    /// Forgets the tokens `revocation` names from memory and ends their push channels; returns
    /// how many were in memory.
    @discardableResult
    func forget(_ revocation: Revocation) -> Int {
        let (count, ended) = state.withLock { state in
            state.epoch += 1
            let revoked = state.users.filter { revocation.covers(credential: $0.key.description, of: $0.value) }.keys
            for digest in revoked { state.users[digest] = nil }
            let grants = state.sessions.filter { digest, grant in
                revocation.covers(session: grant.session) || revocation == .credential(digest.description)
            }.keys
            for digest in grants { state.sessions[digest] = nil }
            return (revoked.count, state.removeChannels { $0.isEnded(by: revocation) })
        }
        for channel in ended { channel.finish() }
        return count
    }

    /// What the storage's tokens (`bearer`, ``StoredTokens/observeRevocations(_:)``) or the
    /// sessions (`sessions`, `SessionStore.observeRevocations(_:)`) say about revocations.
    /// While they cannot be heard, what memory keeps of their tokens is not trusted; once they
    /// can again, the push channels opened with their tokens are checked anew, as revocations
    /// may have gone unheard.
    func heard(_ event: RevocationEvent, bearer: Bool, sessions: Bool) {
        switch event {
        case .revoked(let revocation):
            forget(revocation)
        case .interrupted:
            state.withLock { state in
                state.epoch += 1
                if bearer {
                    state.hearsRevocations = false
                    state.users = [:]
                }
                if sessions {
                    state.hearsSessionRevocations = false
                    state.sessions = [:]
                }
            }
            if bearer {
                logger.warning(
                    "token revocations cannot be heard; every request's token is looked up in the store until they can"
                )
            }
        case .listening:
            let (bearerChannels, sessionChannels) = state.withLock { state in
                state.epoch += 1
                if bearer {
                    state.hearsRevocations = true
                    state.users = [:]
                }
                if sessions {
                    state.hearsSessionRevocations = true
                    state.sessions = [:]
                }
                return (
                    bearer ? state.channels.filter { !$0.value.isSession }.mapValues { ($0.digest, $0.user) } : [:],
                    sessions ? state.channels.filter(\.value.isSession).mapValues(\.session) : [:]
                )
            }
            recheck(bearerChannels)
            recheckSessions(sessionChannels)
        }
    }

    /// Ends the push channels among `open` whose token the storage no longer has for their
    /// user, or all of them if it cannot be asked: revocations may have gone unheard.
    private func recheck(_ open: [Int: (digest: TokenDigest, user: UserID)]) {
        guard let stored, !open.isEmpty else { return }
        let current: [String: UserID]
        do {
            current = try stored.users(forDigests: Array(Set(open.values.map(\.digest.description))))
        } catch {
            logger.error(
                "the push channels' tokens could not be checked after revocations went unheard; the channels are closed",
                metadata: ["error": "\(error)", "channels": "\(open.count)"])
            current = [:]
        }
        for (id, channel) in open where current[channel.digest.description] != channel.user { endChannel(id) }
    }
}

extension TokenStore {
    /// Starts hearing the sessions' revocations, if the store accepts sessions.
    func observeSessions() {
        sessions?.observeRevocations { [weak self] event in self?.heard(event, bearer: false, sessions: true) }
    }

    /// Ends the push channels among `open` whose session is gone, or cannot be checked.
    private func recheckSessions(_ open: [Int: String?]) {
        guard let sessions, !open.isEmpty else { return }
        for (id, session) in open {
            guard let session, (try? sessions.session(id: session)) != nil else {
                state.withLock { $0.channels.removeValue(forKey: id) }?.revoked.finish()
                continue
            }
        }
    }

    /// On a store read from this machine's disk (LMDB), looks every ``checkInterval`` for a
    /// change of the sessions made by another process (`logsync-server sessions revoke`), and
    /// then forgets the access tokens kept in memory and ends the push channels whose session
    /// is gone; until the calling task is cancelled.
    /// Returns at once otherwise: other stores' nodes hear revocations. `HTTPSyncServer` runs
    /// it while it serves.
    public func watchSessions() async {
        guard let sessions, sessions.readsLocally else { return }
        var seen = try? sessions.changeCount
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: checkInterval)
            } catch {
                return
            }
            let now = try? sessions.changeCount
            guard now != seen else { continue }
            seen = now
            // The access tokens kept may be revoked: forget them first, so that a request after
            // a channel closed below is judged by the log.
            state.withLock { state in
                state.epoch += 1
                state.sessions = [:]
            }
            recheckSessions(state.withLock { $0.channels.filter(\.value.isSession).mapValues(\.session) })
        }
    }
}

extension TokenStore.State {
    /// Removes the push channels `isRevoked` picks and returns how to end them.
    mutating func removeChannels(where isRevoked: (TokenStore.Channel) -> Bool) -> [AsyncStream<Void>.Continuation] {
        let revoked = channels.filter { isRevoked($0.value) }
        for id in revoked.keys { channels[id] = nil }
        return revoked.values.map(\.revoked)
    }
}

/// Whether a push channel's revocation stream ended, readable at once from any thread
/// (``TokenStore/untilRevoked(token:user:end:)``).
package final class ChannelEnd: Sendable {
    private let ended = Mutex(false)

    package init() {}

    /// Whether the stream ended: the token was revoked (or the channel closed).
    package var isEnded: Bool { ended.withLock { $0 } }

    func markEnded() { ended.withLock { $0 = true } }
}
