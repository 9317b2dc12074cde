import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on 127.0.0.1 in front of a server that lets bytes through both ways as they come,
/// except once: the first connection whose bytes in ``Direction`` reach `limit` gets exactly
/// `limit` of them through, and then it is cut (both sockets shut down: the peers see a connection
/// lost midway) or stalled (that direction forwards nothing more, the sockets stay open: the
/// peers see a network that stopped). Every later connection passes untouched.
///
/// Blocking sockets, a thread per direction of each connection; every thread ends when its
/// connection closes or ``close()`` is called. Nothing here waits on a clock.
final class CuttingProxy: Sendable {
    enum Direction: Sendable { case toServer, toClient }
    enum Cut: Sendable { case close, stall }

    /// The port the proxy listens on.
    var port: Int { sockets.port }
    private let sockets: ProxySockets
    private let direction: Direction
    private let limit: Int
    private let cut: Cut
    private let state = Mutex<(cuts: Int, connections: Int)>((0, 0))

    init(upstreamPort: Int, direction: Direction, after limit: Int, cut: Cut = .close) throws {
        sockets = try ProxySockets(upstreamPort: upstreamPort)
        self.direction = direction
        self.limit = limit
        self.cut = cut
        sockets.start { [self] client in serve(client) }
    }

    /// How many connections were cut or stalled (0 or 1).
    var cuts: Int { state.withLock { $0.cuts } }

    /// How many connections the proxy accepted.
    var connections: Int { state.withLock { $0.connections } }

    /// Stops accepting and closes every connection still open.
    func close() { sockets.close() }

    /// One connection: a thread per direction; the one that ends first shuts both sockets down,
    /// the one that ends last closes them.
    private func serve(_ client: Int32) {
        state.withLock { $0.connections += 1 }
        guard let upstream = sockets.connectUpstream() else {
            Glibc.close(client)
            return
        }
        guard sockets.track(client, upstream) else { return }
        let remaining = Mutex(2)
        let end: @Sendable () -> Void = { [self] in
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(upstream, Int32(SHUT_RDWR))
            let last = remaining.withLock { count -> Bool in
                count -= 1
                return count == 0
            }
            if last { sockets.untrackAndClose(client, upstream) }
        }
        Thread { [self] in
            pump(from: upstream, to: client, cutting: direction == .toClient)
            end()
        }.start()
        pump(from: client, to: upstream, cutting: direction == .toServer)
        end()
    }

    /// Copies bytes from `source` to `destination` until either closes. With `cutting`, the
    /// first connection of the proxy to pass `limit` bytes this way is cut or stalled there.
    private func pump(from source: Int32, to destination: Int32, cutting: Bool) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var forwarded = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            var sending = count
            var cutHere = false
            if cutting, forwarded + count >= limit {
                cutHere = state.withLock { state in
                    guard state.cuts == 0 else { return false }
                    state.cuts += 1
                    return true
                }
                if cutHere { sending = limit - forwarded }
            }
            guard Self.write(buffer[0..<sending], to: destination) else { return }
            forwarded += sending
            if cutHere {
                switch cut {
                case .close:
                    return
                case .stall:
                    // Nothing more this way: read and drop until the connection ends, so that the
                    // sender is not held up by the proxy but its bytes never arrive.
                    while true {
                        let dropped = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
                        if dropped < 0, errno == EINTR { continue }
                        if dropped <= 0 { return }
                    }
                }
            }
        }
    }

    private static func write(_ bytes: ArraySlice<UInt8>, to socket: Int32) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes[offset...].withUnsafeBytes {
                send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
