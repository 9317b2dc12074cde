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
/// ``init(upstreamPort:decide:)`` decides for every answer instead: forward it, or withhold it
/// as above. The decision may take its time (the answer waits, its client with it), which holds a
/// client between two requests for as long as a test needs.
///
/// Blocking sockets, a thread per direction of each connection; every thread ends when either
/// side closes. Nothing here waits on a clock.
final class InterceptingProxy: Sendable {
    /// The port the proxy listens on.
    var port: Int { sockets.port }
    private let sockets: ProxySockets
    private let decide: @Sendable (_ path: String, _ answerHead: String) -> Decision
    private let withheld: Flag

    /// What becomes of an answer the server gave.
    enum Decision: Sendable {
        /// The client gets it.
        case forward
        /// The client never gets it; its connection stays open, silent, until the client closes it.
        case withhold
    }

    convenience init(
        upstreamPort: Int, interceptedPath: String, intercepted: @escaping @Sendable (_ answerHead: String) -> Void
    ) throws {
        let withheld = Flag()
        try self.init(upstreamPort: upstreamPort, withheld: withheld) { path, head in
            guard path.hasSuffix(interceptedPath), withheld.raise() else { return .forward }
            intercepted(head)
            return .withhold
        }
    }

    /// A proxy that asks `decide`, with the request's path and the answer's head, what becomes of
    /// each answer. `decide` runs on the connection's thread and may block it.
    init(
        upstreamPort: Int, withheld: Flag = Flag(),
        decide: @escaping @Sendable (_ path: String, _ answerHead: String) -> Decision
    ) throws {
        sockets = try ProxySockets(upstreamPort: upstreamPort)
        self.withheld = withheld
        self.decide = decide
        sockets.start { [self] client in serve(client) }
    }

    /// Whether the intercepted answer has been withheld.
    var hasIntercepted: Bool { withheld.isRaised }

    /// Stops accepting and closes every connection still open.
    func close() { sockets.close() }

    /// One client connection: request by request, each forwarded and answered, until a side
    /// closes, a WebSocket upgrade turns it into a pipe, or the intercepted answer ends it.
    private func serve(_ client: Int32) {
        guard sockets.track(client) else { return }
        guard let upstream = sockets.connectUpstream(), sockets.track(upstream) else {
            sockets.untrackAndClose(client)
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
                    if running.last() { sockets.untrackAndClose(client, upstream) }
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
            if decide(path, answer.head) == .withhold {
                withheld.raise()
                while fromClient.some() != nil {}  // until the client is gone
                break
            }
            guard Self.write(answer.bytes, to: client) else { break }
        }
        sockets.untrackAndClose(client, upstream)
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

    /// Whether an answer was withheld: raised once, before the answer's handler runs.
    final class Flag: Sendable {
        private let raised = Mutex(false)

        /// Raises the flag; whether it was down.
        @discardableResult
        func raise() -> Bool {
            raised.withLock { raised in
                defer { raised = true }
                return !raised
            }
        }

        var isRaised: Bool { raised.withLock { $0 } }
    }

    /// A count of threads still running, down to the last.
    private final class Countdown: Sendable {
        private let count: Mutex<Int>
        init(_ count: Int) { self.count = Mutex(count) }
        /// Counts one down; whether it was the last.
        func last() -> Bool {
            count.withLock {
                $0 -= 1
                return $0 == 0
            }
        }
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
                headers.first { $0.hasPrefix(name + ":") }.map {
                    $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
                }
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
            } else if !isRequest, !head.hasPrefix("HTTP/1.1 101"), !head.hasPrefix("HTTP/1.1 204"),
                !head.hasPrefix("HTTP/1.1 304")
            {
                // An answer without a length runs to the end of the connection.
                while fill() {}
                bytes += take(buffer.count)
            }
            return (head, bytes)
        }
    }
}
