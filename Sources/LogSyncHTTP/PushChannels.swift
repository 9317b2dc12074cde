import Foundation
import HTTPTypes
import HummingbirdWSClient
import LogSyncWire
import Logging
import NIOCore
import SyncModel
import Synchronization

/// The push streams of one ``HTTPSyncClient``: each a WebSocket that reconnects until its
/// consumer stops listening, and whether each is connected, for ``HTTPSyncClient/waitForPushChannels()``.
final class PushChannels: Sendable {
    private struct State {
        var next = 0
        /// Open channels → whether each is connected and subscribed.
        var connected: [Int: Bool] = [:]
        var tasks: [Int: Task<Void, Never>] = [:]
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var connections = 0
        /// Why the latest failed connection attempt of any channel failed.
        var lastFailure: SyncError?
        /// Set by ``closeAll()``: no channel opens or connects any more.
        var closed = false

        var allConnected: Bool { connected.values.allSatisfy { $0 } }

        /// Removes and returns the waiters to resume if every channel is connected.
        mutating func readyWaiters() -> [CheckedContinuation<Void, Never>] {
            guard allConnected else { return [] }
            defer { waiters = [:] }
            return Array(waiters.values)
        }
    }

    private let state = Mutex(State())

    /// Opens a channel for `scope`: a stream of hints, kept only while someone listens.
    /// Once the channels are closed, an ended stream, which never connects.
    func open(client: HTTPSyncClient, scope: DatabaseScope) -> AsyncStream<PushHint> {
        let (stream, continuation) = AsyncStream.makeStream(of: PushHint.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            state.next += 1
            state.connected[state.next] = false
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        let channel = PushChannel(id: id, client: client, scope: scope, continuation: continuation, registry: self)
        let task = Task { await channel.run() }
        let closed = state.withLock { state in
            if state.connected[id] != nil { state.tasks[id] = task }
            return state.closed
        }
        // Closed in between: closeAll() did not see this task.
        if closed { task.cancel() }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Records whether channel `id` is connected.
    func setConnected(_ id: Int, _ connected: Bool) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.connected[id] != nil else { return [] }
            state.connected[id] = connected
            if connected { state.connections += 1 }
            return state.readyWaiters()
        }
        for waiter in ready { waiter.resume() }
    }

    /// Forgets channel `id`, which has ended.
    func remove(_ id: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.connected[id] = nil
            state.tasks[id] = nil
            return state.readyWaiters()
        }
        for waiter in ready { waiter.resume() }
    }

    var connectionCount: Int { state.withLock { $0.connections } }

    /// Records why a channel's connection failed or ended.
    func setFailure(_ failure: SyncError) {
        state.withLock { $0.lastFailure = failure }
    }

    var lastFailure: SyncError? { state.withLock { $0.lastFailure } }

    /// Ends every channel, and every channel opened later at once.
    func closeAll() {
        let tasks = state.withLock { state in
            state.closed = true
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
    }

    /// Returns once every open channel is connected (or the calling task is cancelled).
    func waitUntilAllConnected() async {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state in
                    if state.allConnected || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// One push stream: connect, read frames, and on a drop wait (``ReconnectPolicy``) and connect
/// again, yielding one hint after every reconnection, until cancelled.
struct PushChannel: Sendable {
    let id: Int
    let client: HTTPSyncClient
    let scope: DatabaseScope
    let continuation: AsyncStream<PushHint>.Continuation
    let registry: PushChannels

    /// Whether the current connection got its `subscribed` frame, and whether any did.
    private final class Progress: Sendable {
        private let state = Mutex((subscribed: false, everSubscribed: false))

        /// Marks the connection subscribed; returns whether an earlier connection was.
        func subscribe() -> Bool {
            state.withLock { state in
                defer { state = (true, true) }
                return state.everSubscribed
            }
        }

        /// Whether the connection that just ended had subscribed; resets for the next one.
        func endConnection() -> Bool {
            state.withLock { state in
                defer { state.subscribed = false }
                return state.subscribed
            }
        }
    }

    func run() async {
        let configuration = client.configuration
        let format = configuration.format
        var logger = configuration.logger
        logger[metadataKey: "scope"] = "\(scope)"
        var headers = HTTPFields()
        headers[.accept] = format.mediaType
        headers[HTTPField.Name(WireProtocol.deviceHeader)!] = client.device.rawValue
        if configuration.receivesOwnChanges { headers[HTTPField.Name(WireProtocol.receivesOwnChangesHeader)!] = "true" }
        var url = client.url(WireProtocol.pushPath(scope: scope))
        if url.hasPrefix("https://") { url = "wss://" + url.dropFirst("https://".count) }
        if url.hasPrefix("http://") { url = "ws://" + url.dropFirst("http://".count) }

        let progress = Progress()
        var failures = 0
        while !Task.isCancelled {
            if let refused = DescriptorBudget.process.take() {
                registry.setFailure(refused)
                logger.debug("push channel not opened", metadata: ["error": "\(refused)"])
            } else {
                await connectOnce(url: url, headers: headers, format: format, logger: logger, progress: progress)
                DescriptorBudget.process.give()
            }
            registry.setConnected(id, false)
            if progress.endConnection() { failures = 0 }
            if Task.isCancelled { break }
            let delay = configuration.reconnect.delay(afterFailures: failures, random: Double.random(in: 0...1))
            failures += 1
            logger.debug(
                "push channel reconnecting",
                metadata: [
                    "after.ms":
                        "\(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)"
                ])
            do {
                try await configuration.clock.sleep(for: delay)
            } catch {
                break
            }
        }
        continuation.finish()
        registry.remove(id)
    }

    /// One connection, from connecting to its end.
    private func connectOnce(
        url: String, headers: HTTPFields, format: WireFormat, logger: Logger, progress: Progress
    ) async {
        let configuration = client.configuration
        do {
            // The credentials' token of the moment: a session's access token changes with
            // each refresh. Signed out, this throws, and the channel waits and asks again.
            let token = try await client.currentToken.token()
            var connectionHeaders = headers
            connectionHeaders[.authorization] = "Bearer \(token)"
            let wsConfiguration = WebSocketClientConfiguration(
                maxFrameSize: 1 << 20, additionalHeaders: connectionHeaders, closeTimeout: .seconds(1),
                autoPing: .enabled(timePeriod: .seconds(30)))
            let closed = try await WebSocketClient.connect(
                url: url, configuration: wsConfiguration, tlsConfiguration: configuration.tlsConfiguration,
                logger: logger
            ) {
                [continuation, registry, id, scope, logger] inbound, _, _ in
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    let frame: PushFrame
                    switch message {
                    case .binary(let buffer):
                        frame = try Wire.decode(PushFrame.self, from: Array(buffer.readableBytesView), as: format)
                    case .text(let text):
                        frame = try Wire.decode(PushFrame.self, from: Array(text.utf8), as: format)
                    }
                    switch frame {
                    case .subscribed:
                        let reconnected = progress.subscribe()
                        registry.setConnected(id, true)
                        logger.debug("push channel subscribed", metadata: ["reconnected": "\(reconnected)"])
                        // Hints may have been missed while disconnected: fetch once.
                        if reconnected { continuation.yield(PushHint(databaseScope: scope)) }
                    case .hint(let hint):
                        continuation.yield(hint)
                    }
                }
            }
            if closed?.closeCode == .policyViolation {
                // The server revoked the token (a session signed out, a token taken away):
                // the credentials are asked for another. A provider that has none (the
                // session is over) means the device is signed out: the consumer is told to
                // fetch, so that an engine learns of it now rather than at its next request.
                // A fixed token has no other; the channel just stops being hinted.
                logger.debug("push channel closed: the server revoked its token")
                do {
                    _ = try await client.currentToken.replacement(forRejected: token)
                } catch  where error.code == .notAuthenticated {
                    continuation.yield(PushHint(databaseScope: scope))
                } catch {
                    logger.debug("the credentials failed", metadata: ["error": "\(error)"])
                }
            }
        } catch {
            if !Task.isCancelled {
                // Mapped as a request's failure is: out of descriptors, refused, TLS…
                let failure = TransportFailure.map(
                    error, doing: "push channel", mayHaveApplied: false, server: configuration.serverURL)
                registry.setFailure(failure)
                logger.debug("push channel failed", metadata: ["error": "\(failure)"])
            }
        }
    }
}
