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
    let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let direction: Direction
    private let limit: Int
    private let cut: Cut
    private let state = Mutex<(cuts: Int, connections: Int, closed: Bool, sockets: Set<Int32>)>((0, 0, false, []))

    init(upstreamPort: Int, direction: Direction, after limit: Int, cut: Cut = .close) throws {
        self.upstreamPort = upstreamPort
        self.direction = direction
        self.limit = limit
        self.cut = cut
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket failed: \(errno)") }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            Glibc.close(descriptor)
            throw TestFailure("bind or listen failed: \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in acceptLoop() }.start()
    }

    /// How many connections were cut or stalled (0 or 1).
    var cuts: Int { state.withLock { $0.cuts } }

    /// How many connections the proxy accepted.
    var connections: Int { state.withLock { $0.connections } }

    /// Stops accepting and closes every connection still open.
    func close() {
        let sockets = state.withLock { state in
            state.closed = true
            defer { state.sockets = [] }
            return state.sockets
        }
        for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            Thread { [self] in serve(client) }.start()
        }
    }

    /// Tracks `sockets` for ``close()``; `false` (and closes them) once the proxy is closed.
    private func track(_ sockets: Int32...) -> Bool {
        let open = state.withLock { state in
            guard !state.closed else { return false }
            state.sockets.formUnion(sockets)
            return true
        }
        if !open { for socket in sockets { Glibc.close(socket) } }
        return open
    }

    private func untrack(_ sockets: Int32...) {
        state.withLock { state in for socket in sockets { state.sockets.remove(socket) } }
    }

    private func connectUpstream() -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        var address = Self.loopback(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(descriptor)
            return nil
        }
        return descriptor
    }

    /// One connection: a thread per direction; the one that ends first shuts both sockets down,
    /// the one that ends last closes them.
    private func serve(_ client: Int32) {
        state.withLock { $0.connections += 1 }
        guard let upstream = connectUpstream() else {
            Glibc.close(client)
            return
        }
        guard track(client, upstream) else { return }
        let remaining = Mutex(2)
        let end: @Sendable () -> Void = { [self] in
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(upstream, Int32(SHUT_RDWR))
            let last = remaining.withLock { count -> Bool in
                count -= 1
                return count == 0
            }
            if last {
                untrack(client, upstream)
                Glibc.close(client)
                Glibc.close(upstream)
            }
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
            let written = bytes[offset...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
