import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 in front of a server, for the moment between a request and its
/// answer: it forwards every request and answer of HTTP/1.1 as is (a WebSocket upgrade becomes
/// a plain byte pipe), except the first request whose path ends with `interceptedPath`. That
/// request is forwarded, the server's whole answer is read, and instead of forwarding it the
/// proxy calls `intercepted` with the answer's head (to kill the client, say). The client's
/// connection then stays open, silent, until the client closes it (or dies): it never learns
/// that the answer is not coming, so it cannot send the request again.
///
/// Blocking sockets, a thread per direction of each connection; every thread ends when either
/// side closes. Nothing here waits on a clock.
final class InterceptingProxy: Sendable {
    /// The port the proxy listens on.
    let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let interceptedPath: String
    private let intercepted: @Sendable (_ answerHead: String) -> Void
    private let state = Mutex<(done: Bool, closed: Bool, sockets: Set<Int32>)>((false, false, []))

    init(upstreamPort: Int, interceptedPath: String, intercepted: @escaping @Sendable (_ answerHead: String) -> Void) throws {
        self.upstreamPort = upstreamPort
        self.interceptedPath = interceptedPath
        self.intercepted = intercepted
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
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Whether the intercepted answer has been withheld.
    var hasIntercepted: Bool { state.withLock { $0.done } }

    /// Stops accepting and closes every connection still open.
    func close() {
        let sockets = state.withLock { state in
            state.closed = true
            defer { state.sockets = [] }
            return state.sockets
        }
        // shutdown, not close: the threads blocked on these descriptors wake up and close them.
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
                return  // closed
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    /// Registers an open socket, or closes it at once if the proxy is closed.
    private func track(_ socket: Int32) -> Bool {
        let open = state.withLock { state in
            if !state.closed { state.sockets.insert(socket) }
            return !state.closed
        }
        if !open { Glibc.close(socket) }
        return open
    }

    private func untrackAndClose(_ sockets: Int32...) {
        state.withLock { state in for socket in sockets { state.sockets.remove(socket) } }
        for socket in sockets { Glibc.close(socket) }
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

    /// One client connection: request by request, each forwarded and answered, until a side
    /// closes, a WebSocket upgrade turns it into a pipe, or the intercepted answer ends it.
    private func serve(_ client: Int32) {
        guard track(client) else { return }
        guard let upstream = connectUpstream(), track(upstream) else {
            untrackAndClose(client)
            return
        }
        let fromClient = Reader(client)
        let fromServer = Reader(upstream)
        while let request = fromClient.message(isRequest: true) {
            guard Self.write(request.bytes, to: upstream) else { break }
            if request.head.lowercased().contains("\r\nupgrade:") {
                // A WebSocket: bytes both ways, as they come, until either side closes; the
                // direction that ends last closes both sockets.
                let running = Countdown(2)
                let end: @Sendable () -> Void = { [self] in
                    if running.last() { untrackAndClose(client, upstream) }
                }
                let other = Thread {
                    Self.pipe(fromServer, to: client)
                    end()
                }
                other.start()
                Self.pipe(fromClient, to: upstream)
                end()
                return
            }
            guard let answer = fromServer.message(isRequest: false) else { break }
            let path = request.head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            let intercept = path.hasSuffix(interceptedPath) && state.withLock { state in
                defer { state.done = true }
                return !state.done
            }
            if intercept {
                intercepted(answer.head)
                while fromClient.some() != nil {}  // until the client is gone
                break
            }
            guard Self.write(answer.bytes, to: client) else { break }
        }
        untrackAndClose(client, upstream)
    }

    /// Copies what `reader` reads to `socket` until either side closes, then closes both.
    private static func pipe(_ reader: Reader, to socket: Int32) {
        while let bytes = reader.some(), write(bytes, to: socket) {}
        shutdown(socket, Int32(SHUT_RDWR))
        shutdown(reader.descriptor, Int32(SHUT_RDWR))
    }

    private static func write(_ bytes: [UInt8], to socket: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// A count of threads still running, down to the last.
    private final class Countdown: Sendable {
        private let count: Mutex<Int>
        init(_ count: Int) { self.count = Mutex(count) }
        /// Counts one down; whether it was the last.
        func last() -> Bool { count.withLock { $0 -= 1; return $0 == 0 } }
    }

    /// Reads HTTP/1.1 messages (or plain bytes) from a socket, with a buffer of what was read
    /// beyond the last message.
    final class Reader: @unchecked Sendable {
        let descriptor: Int32
        private var buffer: [UInt8] = []

        init(_ descriptor: Int32) { self.descriptor = descriptor }

        /// Reads more into the buffer; `false` at the end of the stream.
        private func fill() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                buffer += chunk[0..<count]
                return true
            }
        }

        private func take(_ count: Int) -> [UInt8] {
            let taken = Array(buffer.prefix(count))
            buffer.removeFirst(taken.count)
            return taken
        }

        /// Whatever is buffered, or the next bytes to arrive; `nil` at the end of the stream.
        func some() -> [UInt8]? {
            if buffer.isEmpty, !fill() { return nil }
            return take(buffer.count)
        }

        /// The bytes up to and including `delimiter`; `nil` if the stream ends first.
        private func until(_ delimiter: [UInt8]) -> [UInt8]? {
            var searched = 0
            while true {
                if buffer.count >= delimiter.count {
                    for start in searched...(buffer.count - delimiter.count)
                    where buffer[start..<start + delimiter.count].elementsEqual(delimiter) {
                        return take(start + delimiter.count)
                    }
                    searched = buffer.count - delimiter.count + 1
                }
                guard fill() else { return nil }
            }
        }

        private func exactly(_ count: Int) -> [UInt8]? {
            while buffer.count < count { guard fill() else { return nil } }
            return take(count)
        }

        /// One whole message: its head (start line and headers) and every byte of it, body
        /// included (by `Content-Length` or chunked); `nil` if the stream ends first.
        func message(isRequest: Bool) -> (head: String, bytes: [UInt8])? {
            guard let headBytes = until(Array("\r\n\r\n".utf8)) else { return nil }
            let head = String(decoding: headBytes, as: UTF8.self)
            var bytes = headBytes
            let headers = head.split(separator: "\r\n").dropFirst().map { $0.lowercased() }
            func value(_ name: String) -> String? {
                headers.first { $0.hasPrefix(name + ":") }.map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
            }
            if value("transfer-encoding")?.contains("chunked") == true {
                while true {
                    guard let sizeLine = until(Array("\r\n".utf8)) else { return nil }
                    bytes += sizeLine
                    let sizeText = String(decoding: sizeLine, as: UTF8.self).split(separator: ";").first ?? ""
                    let size = Int(sizeText.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16) ?? 0
                    if size == 0 {
                        // Trailer lines, if any, then an empty line.
                        while let line = until(Array("\r\n".utf8)) {
                            bytes += line
                            if line.count == 2 { return (head, bytes) }
                        }
                        return nil
                    }
                    guard let chunk = exactly(size + 2) else { return nil }
                    bytes += chunk
                }
            }
            if let length = value("content-length").flatMap({ Int($0) }) {
                guard let body = exactly(length) else { return nil }
                bytes += body
            } else if !isRequest, !head.hasPrefix("HTTP/1.1 101"), !head.hasPrefix("HTTP/1.1 204"), !head.hasPrefix("HTTP/1.1 304") {
                // An answer without a length runs to the end of the connection.
                while fill() {}
                bytes += take(buffer.count)
            }
            return (head, bytes)
        }
    }
}
