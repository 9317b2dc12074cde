import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The sockets of a test TCP proxy on 127.0.0.1 (`InterceptingProxy`, `CuttingProxy`): the
/// listener on a free port, a thread accepting connections and handing each to the proxy, the
/// connections to the server behind it, and every socket still open, so that ``close()`` ends
/// them all. Blocking sockets; nothing here waits on a clock.
final class ProxySockets: Sendable {
    /// The port the proxy listens on.
    let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    /// Whether ``close()`` was called, whether the accepting thread runs (it then closes the
    /// listener when it ends), and the sockets open.
    private let state = Mutex<(closed: Bool, accepting: Bool, sockets: Set<Int32>)>((false, false, []))

    /// Listens on a free loopback port, in front of the server on `upstreamPort`.
    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("socket failed: \(errno)") }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        let bound = withLoopbackAddress(port: 0) { bind(descriptor, $0, $1) }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            Glibc.close(descriptor)
            throw TestFailure("bind or listen failed: \(errno)")
        }
        listener = descriptor
        port = boundPort(descriptor)
    }

    /// Starts accepting: each client connection goes to `serve` on a thread of its own.
    func start(serving serve: @escaping @Sendable (_ client: Int32) -> Void) {
        guard
            state.withLock({ state in
                guard !state.closed else { return false }
                state.accepting = true
                return true
            })
        else { return }
        Thread { [self] in
            // The listener is closed here, once accept has stopped: closed by ``close()`` while
            // this thread was between two accepts, its number could be another socket's by the
            // next one.
            defer { Glibc.close(listener) }
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return  // shut down
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                Thread { serve(client) }.start()
            }
        }.start()
    }

    /// Stops accepting and shuts down every socket still open: the threads blocked on them wake
    /// up and close them.
    ///
    /// The sockets are shut down while the lock is held, so none is closed meanwhile (its owner
    /// closes it after ``untrackAndClose(_:)`` took it out): a socket closed already could be
    /// another's by now. Calling it again does nothing.
    func close() {
        let closeListener = state.withLock { state -> Bool? in
            guard !state.closed else { return nil }
            state.closed = true
            for socket in state.sockets { shutdown(socket, Int32(SHUT_RDWR)) }
            shutdown(listener, Int32(SHUT_RDWR))
            return !state.accepting
        }
        if closeListener == true { Glibc.close(listener) }
    }

    /// Registers open sockets for ``close()``; once the proxy is closed, closes them and
    /// returns `false`.
    func track(_ sockets: Int32...) -> Bool {
        let open = state.withLock { state in
            guard !state.closed else { return false }
            state.sockets.formUnion(sockets)
            return true
        }
        if !open { for socket in sockets { Glibc.close(socket) } }
        return open
    }

    /// Forgets sockets the proxy is about to close itself.
    func untrack(_ sockets: Int32...) {
        state.withLock { state in for socket in sockets { state.sockets.remove(socket) } }
    }

    /// Forgets and closes sockets.
    func untrackAndClose(_ sockets: Int32...) {
        state.withLock { state in for socket in sockets { state.sockets.remove(socket) } }
        for socket in sockets { Glibc.close(socket) }
    }

    /// A new connection to the server, or `nil` if it refuses.
    func connectUpstream() -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        let connected = withLoopbackAddress(port: upstreamPort) { connect(descriptor, $0, $1) }
        guard connected == 0 else {
            Glibc.close(descriptor)
            return nil
        }
        return descriptor
    }
}
