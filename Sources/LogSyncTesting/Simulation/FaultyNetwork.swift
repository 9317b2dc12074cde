import Foundation
import LogSync
import LogSyncServer

/// The simulation's misbehaving network and server, for a seeded simulation of an app's own
/// data (the SQLite store's, say): each device's databases go through it, one seed decides the
/// fate of every request (``NetworkFate``), and it keeps what the server acknowledged.
///
/// ```swift
/// let network = try FaultyNetwork(directory: directory, seed: 17, devices: ["phone", "laptop"])
/// let phone = network.database(device: "phone", user: "alice")
/// // … sync through it, then:
/// network.setFaults(false)     // settle
/// let expected = network.acknowledgedTitles(of: "alice")
/// ```
///
/// Delayed requests are not part of its mix (they wait for a release the simulation's own
/// scheduler gives): ``NetworkFaultRates/delayed`` is set to 0.
public final class FaultyNetwork: Sendable {
    let network: SimulatedNetwork

    /// A server in `directory/server` (pages of `pageSize` changes) behind a network whose
    /// faults follow `seed` and `rates`, for the devices named.
    public init(
        directory: URL, seed: UInt64, rates: NetworkFaultRates = NetworkFaultRates(), pageSize: Int = 400,
        devices: [String]
    ) throws {
        var rates = rates
        rates.delayed = 0
        network = try SimulatedNetwork(
            server: SyncServer.Configuration(
                directory: directory.appendingPathComponent("server", isDirectory: true), durability: .fast,
                maxChangesPerPage: pageSize),
            seed: seed, rates: rates, devices: devices, trace: SimulationTrace())
    }

    /// The database of `scope` of `user` as `device` reaches it, through the network.
    public func database(device: String, user: UserID, scope: DatabaseScope = .private) -> any CloudDatabase {
        SimulatedLink(network: network, device: device, user: user, scope: scope)
    }

    /// The server running now.
    public var server: SyncServer { network.currentServer }

    /// Stops the server and starts it again on its data: what it committed must survive.
    public func restartServer() throws { try network.restartServer() }

    /// Turns faults on or off (off while the devices settle at the end).
    public func setFaults(_ enabled: Bool) { network.setFaults(enabled) }

    /// How many requests met each fate so far.
    public var fateCounts: [NetworkFate: Int] { network.fateCounts }

    /// Every record of `user`'s own database the server must hold after replaying each change
    /// it acknowledged, with its `title` field (`""` without one).
    public func acknowledgedTitles(of user: UserID) -> [Record.ID: String] {
        network.history.withLock { $0.expectedNotes(of: user) }
    }
}
