import LogSyncServer
import NIOCore
import SyncModel
import Synchronization

extension HTTPSyncServer {
    /// The limits on one client of the server, a user or an address (Docs/Protocol.md, "HTTP",
    /// "Limits"): how many requests it may send per second, in bursts of how many, and how many
    /// it may have in progress at once. A request past one is refused with 429
    /// `requestRateLimited` and a retry-after, before anything of it is read or done.
    ///
    /// ```swift
    /// var configuration = HTTPSyncServer.Configuration()
    /// configuration.userLimits = .init(requestsPerSecond: 50, burst: 200, concurrentRequests: 8)
    /// configuration.addressLimits = .unlimited      // behind a proxy that limits addresses itself
    /// ```
    public struct ClientLimits: Sendable, Hashable {
        /// The requests per second a client may send in the long run; 0: no rate limit.
        public var requestsPerSecond: Double
        /// How many requests a client may send at once above that rate, after a quiet time: the
        /// size of its token bucket.
        public var burst: Int
        /// How many requests a client may have in progress at once; 0: no limit.
        public var concurrentRequests: Int

        public init(requestsPerSecond: Double, burst: Int, concurrentRequests: Int) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
            self.concurrentRequests = concurrentRequests
        }

        /// The default per user: 200 requests per second, in bursts of 2,000, 16 at once. An
        /// engine sends one request at a time per database (an initial sync fetches pages of
        /// 400 records one after another), so only a misbehaving client comes near.
        public static let perUser = ClientLimits(requestsPerSecond: 200, burst: 2_000, concurrentRequests: 16)
        /// The default per address: 400 requests per second, in bursts of 4,000, 64 at once;
        /// above the per-user limits, for several users behind one address (a NAT).
        public static let perAddress = ClientLimits(requestsPerSecond: 400, burst: 4_000, concurrentRequests: 64)
        /// No limit.
        public static let unlimited = ClientLimits(requestsPerSecond: 0, burst: 0, concurrentRequests: 0)
    }
}

/// Who a request comes from, for ``ClientLimiter``: its user (when its token is known) and its
/// address.
package enum Client: Hashable, Sendable, CustomStringConvertible {
    case user(UserID)
    /// An IPv4 address, or the first 64 bits of an IPv6 address (one site's network).
    case address(String)

    /// The client of a connection's remote address; `nil` for one without an IP address.
    package init?(remoteAddress: SocketAddress?) {
        switch remoteAddress {
        case .v4(let address)?:
            self = .address(address.host)
        case .v6(let address)?:
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                // An IPv4 address mapped into IPv6, by a server listening on both.
                self = .address(bytes[12..<16].map(String.init).joined(separator: "."))
            } else {
                let groups = stride(from: 0, to: 8, by: 2).map {
                    String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
                }
                self = .address(groups.joined(separator: ":") + "::/64")
            }
        default:
            return nil
        }
    }

    package var description: String {
        switch self {
        case .user(let user): "\(user)"
        case .address(let address): "address \(address)"
        }
    }
}

/// The per-client limits of a server (``HTTPSyncServer/ClientLimits``): a token bucket and a
/// count of requests in progress per user and per address. A request is admitted only if every
/// client it comes from may send it; a refused request takes no token and counts nothing.
package final class ClientLimiter: Sendable {
    let userLimits: HTTPSyncServer.ClientLimits
    let addressLimits: HTTPSyncServer.ClientLimits
    let now: @Sendable () -> Duration
    private let state = Mutex(State())

    private struct State {
        var clients: [Client: Entry] = [:]
        /// When `clients` holds this many, idle ones are forgotten.
        var pruneAt = 4_096
    }

    private struct Entry {
        var bucket: TokenBucket?
        var inProgress = 0
    }

    /// What a refused request is told to wait when it had too many in progress: one of them is
    /// likely to have finished by then.
    static let concurrencyRetryAfter = Duration.seconds(1)

    init(
        userLimits: HTTPSyncServer.ClientLimits, addressLimits: HTTPSyncServer.ClientLimits,
        now: @escaping @Sendable () -> Duration
    ) {
        self.userLimits = userLimits
        self.addressLimits = addressLimits
        self.now = now
    }

    /// A request admitted: it counts as in progress for its clients until this is released
    /// (``release()``, or when it is freed).
    final class Pass: Sendable {
        private let limiter: ClientLimiter?
        private let clients: [Client]
        private let released = Atomic(false)

        fileprivate init(limiter: ClientLimiter?, clients: [Client]) {
            self.limiter = limiter
            self.clients = clients
        }

        /// Ends the request's count; later calls do nothing.
        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            limiter?.finish(clients)
        }

        deinit { release() }
    }

    /// Admits a request of `user` (if its token is known) from `address`, or says why not.
    ///
    /// - Parameter counted: `false` for a request that is not counted as in progress (a push
    ///   channel, which lasts as long as its device is connected); it still takes a token.
    /// - Returns: The request's pass, or the `requestRateLimited` error to answer with 429.
    func admit(user: UserID?, address: Client?, counted: Bool = true) -> Result<Pass, SyncError> {
        let clients = [address, user.map(Client.user)].compactMap { $0 }
        let now = now()
        let refusal = state.withLock { state -> SyncError? in
            var entries: [(Client, Entry)] = []
            for client in clients {
                let limits = limits(of: client)
                var entry = state.clients[client] ?? Entry()
                if counted, limits.concurrentRequests > 0, entry.inProgress >= limits.concurrentRequests {
                    return SyncError(
                        .requestRateLimited,
                        "\(client) has \(entry.inProgress) requests in progress, the most this server handles at once for one \(client.kind); retry when one has finished",
                        retryAfter: Self.concurrencyRetryAfter)
                }
                if limits.requestsPerSecond > 0 {
                    var bucket =
                        entry.bucket ?? TokenBucket(rate: limits.requestsPerSecond, burst: limits.burst, now: now)
                    if let wait = bucket.take(at: now) {
                        return SyncError(
                            .requestRateLimited,
                            "\(client) sent more requests than this server takes from one \(client.kind): \(Self.shown(limits.requestsPerSecond)) per second, in bursts of \(limits.burst)",
                            retryAfter: wait)
                    }
                    entry.bucket = bucket
                }
                if counted { entry.inProgress += 1 }
                entries.append((client, entry))
            }
            // Every client may: the tokens and counts are taken together.
            for (client, entry) in entries { state.clients[client] = entry }
            if state.clients.count >= state.pruneAt {
                state.clients = state.clients.filter { _, entry in
                    entry.inProgress > 0 || entry.bucket.map { !$0.isFull(at: now) } ?? false
                }
                state.pruneAt = max(4_096, state.clients.count * 2)
            }
            return nil
        }
        if let refusal { return .failure(refusal) }
        return .success(Pass(limiter: counted ? self : nil, clients: clients))
    }

    /// The requests `client` has in progress now: for tests.
    package func inProgress(_ client: Client) -> Int {
        state.withLock { $0.clients[client]?.inProgress ?? 0 }
    }

    private func finish(_ clients: [Client]) {
        let now = now()
        state.withLock { state in
            for client in clients {
                guard var entry = state.clients[client] else { continue }
                entry.inProgress -= 1
                if entry.inProgress <= 0, entry.bucket.map({ $0.isFull(at: now) }) ?? true {
                    state.clients[client] = nil
                } else {
                    state.clients[client] = entry
                }
            }
        }
    }

    private func limits(of client: Client) -> HTTPSyncServer.ClientLimits {
        switch client {
        case .user: userLimits
        case .address: addressLimits
        }
    }

    private static func shown(_ rate: Double) -> String {
        rate == rate.rounded() && rate < 1e15 ? String(Int64(rate)) : String(rate)
    }
}

extension Client {
    /// `user` or `address`, for messages.
    var kind: String {
        switch self {
        case .user: "user"
        case .address: "address"
        }
    }
}
