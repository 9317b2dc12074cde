import Foundation
import LogStore
import LogSync
import LogSyncServer
import SyncModel
import Synchronization

/// A seeded simulation of several devices syncing through one server over a network that
/// misbehaves: the test of the whole engine that no hand-written scenario can be.
///
/// Each device (a ``TestDevice`` with `devicePolicy`) is a notes app with its own engine, device log and
/// account. One seed decides everything: the server's page size, each device's fetch limit,
/// every operation (edits, deletions, zones, sends, fetches, engine and server restarts,
/// account switches) and what the network does with every request (``NetworkFate``: dropped
/// requests, answers dropped after the server applied them, duplicates, delays that let other
/// devices overtake, throttling, `zoneBusy`, expired tokens). Operations run one at a time, so
/// a seed replays exactly; a request the network delays leaves its device busy while the
/// others go on.
///
/// At the end the network is fixed, held requests go through, and every device sends and
/// fetches until a round changes nothing. Then ``check()`` requires:
/// - **convergence**: each device's notes equal the server's records of its account, and
///   nothing is left pending;
/// - **nothing acknowledged lost**: the server holds exactly what replaying every change it
///   acknowledged gives (`ServerHistory`), restarts included;
/// - **no edit lost**: every local edit was acknowledged or given up by the app's policy;
/// - **the projection rule**: every device log's and server log's projections equal their
///   rebuild from the entries.
///
/// With ``Configuration/participants`` (``Configuration/sharing``) the first user owns every
/// zone and shares them: the owner's devices save, edit and delete shares through their engines
/// (inviting and removing participants), each participant's devices run an engine on the
/// participant's shared database, accept shares (`fetchShareMetadata` and `acceptShares`
/// through the faulty network), edit the shared notes and leave shares. The configuration's
/// switches add shares of record hierarchies (``Configuration/hierarchyShares``), permission
/// changes while participants work (``Configuration/permissionChanges``), shares open to anyone
/// with the link (``Configuration/linkSharing``) and invitations over the participant limit
/// (``Configuration/participantLimit``). The checks then also require that each participant's
/// shared database holds exactly the owner's notes shared with them and accepted (the zones of
/// zone-wide shares, the hierarchies of the others; nothing no longer shared), that each
/// participant's devices converge to it, that no read-only participant's change was ever
/// acknowledged, and that participants' acknowledged changes are in the owner's database.
///
/// ```swift
/// let simulation = try Simulation(seed: 17, directory: temporaryDirectory)
/// let report = try await simulation.run()   // throws SimulationFailure naming the seed
/// let shared = try Simulation(seed: 17, directory: otherDirectory, configuration: .sharing)
/// ```
public final class Simulation {
    /// What a simulation does, besides what its seed decides.
    public struct Configuration: Sendable {
        /// How many devices of ``users`` sync (at least 1); with ``participants``, the owner's.
        public var devices = 3
        /// How many operations each device makes, on average (the total is ``deviceCount`` times this).
        public var operationsPerDevice = 100
        /// The users whose accounts devices switch between; every device starts as the first.
        public var users: [UserID] = ["alice", "bob"]
        /// How many zones the notes live in.
        public var zones = 3
        /// How many note names each zone has.
        public var notesPerZone = 4
        /// How often the network misbehaves.
        public var faults = NetworkFaultRates()
        /// The server's page size; `nil`: drawn from the seed (2, 3, 5 or 400).
        public var maxChangesPerPage: Int?
        /// The most send-and-fetch rounds the devices may take to settle at the end.
        public var maxSettleRounds = 12
        /// How to run one seed again, quoted in failures (`{seed}` is replaced by the seed):
        /// a test names its own command here.
        public var rerunCommand = "Simulation(seed: {seed}, directory: …).run()"
        /// The users the first user shares zones with, each with the permission the owner gives
        /// them and their devices (on their shared databases). Empty (the default): no sharing,
        /// and every device is one of ``users``'. Not empty: ``devices`` are the owner's, and
        /// ``users`` should hold the owner alone (participants do not switch accounts).
        public var participants: [SharingParticipant] = []
        /// With ``participants``: the owner also shares record hierarchies (F123). Every device
        /// saves the notes `n1` and `n2` of each zone as children of `n0` (their `parent`); a
        /// hierarchy share, rooted at `n0`, shares those three and nothing else of the zone. A
        /// zone is shared whole or by its hierarchy, never both (`alreadyShared`).
        public var hierarchyShares = false
        /// With ``participants``: the owner changes the permission of read-write participants to
        /// read-only and back while they work (F121). A read-only participant of the
        /// configuration stays read-only, so that none of their changes may ever be acknowledged.
        public var permissionChanges = false
        /// With ``participants``: the owner opens shares to anyone holding their URL (read-only
        /// `publicPermission`) and closes them again; participants accept open shares they were
        /// not invited to.
        public var linkSharing = false
        /// With ``participants``: 100 more users are registered, and the owner now and then
        /// invites all of them to a share, which the server refuses with `tooManyParticipants`
        /// (a share holds at most 100 participants, its owner included); the owner's device then
        /// shows the server's share again.
        public var participantLimit = false
        /// With ``hierarchyShares``: the owner moves notes into and out of the hierarchy (a
        /// note's `folder` field names its parent); the server reports a note moved out as
        /// deleted to the hierarchy's participants and one moved in as new (F123), and the
        /// checks expect each participant to hold exactly the hierarchy's notes. On in
        /// ``sharing``.
        public var movesRecordsBetweenHierarchies = false

        public init() {}

        /// Sharing between three users: alice owns the zones on 2 devices; bob (read-write) has 2
        /// devices, carol (read-only) 1. Shares are zone-wide or of record hierarchies, bob's
        /// permission changes while he works, shares open to anyone with the link and close
        /// again, the owner runs into the participant limit, and moves notes into and out of
        /// shared hierarchies.
        public static var sharing: Configuration {
            var configuration = Configuration()
            configuration.devices = 2
            configuration.users = ["alice"]
            configuration.participants = [
                SharingParticipant("bob", permission: .readWrite, devices: 2),
                SharingParticipant("carol", permission: .readOnly, devices: 1),
            ]
            configuration.hierarchyShares = true
            configuration.permissionChanges = true
            configuration.linkSharing = true
            configuration.participantLimit = true
            configuration.movesRecordsBetweenHierarchies = true
            return configuration
        }

        /// Every device's count: the owner's and the participants'.
        public var deviceCount: Int { devices + participants.reduce(0) { $0 + $1.devices } }
    }

    /// A user the owner shares zones with, in ``Configuration/participants``.
    public struct SharingParticipant: Sendable, Hashable {
        public var user: UserID
        /// What the owner lets them do.
        public var permission: Share.Participant.Permission
        /// How many devices they sync shared notes on (each an engine on their shared database).
        public var devices: Int

        public init(_ user: UserID, permission: Share.Participant.Permission, devices: Int = 1) {
            self.user = user
            self.permission = permission
            self.devices = devices
        }

        /// The address the owner invites them by (registered with the server at the start).
        public var emailAddress: String { "\(user.rawValue)@example.com" }
    }

    /// What the sharing operations did, in a run with participants.
    public struct SharingReport: Sendable, Hashable {
        /// Shares saved by the owner's devices: zones shared, participants invited.
        public var sharesSaved = 0
        /// Participants removed by the owner's devices.
        public var participantsRemoved = 0
        /// Shares deleted by the owner's devices.
        public var sharesDeleted = 0
        /// Acceptances tried by participants' devices, and those the server answered with success.
        public var acceptsTried = 0
        public var accepted = 0
        /// Shares left by participants' devices.
        public var left = 0
        /// Record changes of participants the server acknowledged.
        public var participantChangesAcknowledged = 0
        /// Shares of record hierarchies saved by the owner's devices (in ``sharesSaved`` too).
        public var hierarchySharesSaved = 0
        /// Participants' permissions changed by the owner's devices (read-write ↔ read-only).
        public var permissionsChanged = 0
        /// Shares opened to anyone with the link, and closed again, by the owner's devices.
        public var linksOpened = 0
        public var linksClosed = 0
        /// Shares the owner's devices saved with more participants than a share may hold, and
        /// the operations that met `tooManyParticipants`.
        public var crowdInvitations = 0
        public var participantLimitRefusals = 0
        /// Notes the owner's devices moved into or out of a hierarchy.
        public var notesMoved = 0

        public init() {}
    }

    /// What one run did.
    public struct Report: Sendable, CustomStringConvertible {
        /// The seed of the run: the same seed replays the same run.
        public var seed: UInt64
        /// The seeded operations run, over all devices.
        public var operations = 0
        /// How many requests met each network fate (delivered, failed, answer lost …).
        public var fates: [NetworkFate: Int] = [:]
        /// `sendChanges` calls made by the devices.
        public var sends = 0
        /// `fetchChanges` calls made by the devices.
        public var fetches = 0
        /// Engines disposed of and opened again on their device logs.
        public var engineRestarts = 0
        /// Times the server was stopped and opened again on its data directory.
        public var serverRestarts = 0
        /// Times a device's account switched to the next user.
        public var accountSwitches = 0
        /// Saves the server acknowledged (answers the network dropped included).
        public var savesAcknowledged = 0
        /// How the devices' local edits ended, as the apps saw them, summed over the devices.
        public var edits = TestDevice.Tally()
        /// Edits given up because their zone was deleted, or the account changed.
        public var editsDropped: Int { edits.droppedWithZone + edits.droppedByAccountChange }
        /// Rounds of send-and-fetch on every device, after the faults, until nothing changed.
        public var settleRounds = 0
        /// Every line of the trace.
        public var trace: [String] = []
        /// Each device's notes at the end, as sorted `zone/name = title` lines.
        public var finalNotes: [[String]] = []
        /// What sharing did (all zero without participants).
        public var sharing = SharingReport()

        public var description: String {
            let faults = fates.filter { $0.key != .delivered }.sorted { $0.key < $1.key }.map {
                "\($0.key) \($0.value)"
            }
            return "seed \(seed): \(operations) operations, \(sends) sends, \(fetches) fetches, "
                + "\(fates[.delivered] ?? 0) requests delivered, faults [\(faults.joined(separator: ", "))], "
                + "\(engineRestarts) engine restarts, \(serverRestarts) server restarts, \(accountSwitches) account switches, "
                + "\(savesAcknowledged) saves acknowledged, conflicts \(edits.conflictsWon) won + \(edits.conflictsLost) lost, "
                + "\(editsDropped) edits dropped with zones or accounts, settled in \(settleRounds) rounds"
                + (sharing == SharingReport()
                    ? ""
                    : "; sharing: \(sharing.sharesSaved) shares saved, "
                        + "\(sharing.participantsRemoved) participants removed, \(sharing.sharesDeleted) shares deleted, "
                        + "\(sharing.accepted) of \(sharing.acceptsTried) acceptances succeeded, \(sharing.left) shares left, "
                        + "\(sharing.participantChangesAcknowledged) participants' changes acknowledged, \(edits.refused) edits refused, "
                        + "\(sharing.hierarchySharesSaved) hierarchy shares saved, \(sharing.permissionsChanged) permissions changed, "
                        + "\(sharing.linksOpened) links opened, \(sharing.linksClosed) closed, "
                        + "\(sharing.crowdInvitations) shares over the participant limit "
                        + "(\(sharing.participantLimitRefusals) tooManyParticipants), \(sharing.notesMoved) notes moved")
        }
    }

    public let seed: UInt64
    public let configuration: Configuration
    /// The devices, `A`, `B`, … in order.
    public let devices: [TestDevice]
    /// Each device's account, in the order of ``devices``; the simulation switches them between users.
    public let accounts: [SimulatedAccount<UserID>]
    private let network: SimulatedNetwork
    private let trace: SimulationTrace
    private var random: SeededRandom
    private var report: Report
    private var busy: [String?]
    private var step = 0
    private let zoneIDs: [RecordZone.ID]
    private let recordIDs: [Record.ID]
    /// Each device's participant, `nil` for a device of ``Configuration/users``.
    private let participantOf: [SharingParticipant?]
    /// The owner's user record name (`_user<N>`): the owner name of shared zones' IDs.
    private let ownerName: String
    /// Each participant's user record name.
    private let recordNames: [UserID: String]
    private let acceptances = Tally()
    /// The invitations participants found refused (``invitation(_:_:)``).
    private var refusedInvitations: Set<String> = []
    /// The e-mail addresses of the users registered to go over the participant limit.
    private let crowd: [String]

    /// Sets up the server in `directory/server` and each device's log in `directory/<name>`.
    ///
    /// - Throws: `LogStoreError` if a log cannot be created.
    public init(seed: UInt64, directory: URL, configuration: Configuration = Configuration()) throws {
        precondition(
            configuration.devices >= 1 && !configuration.users.isEmpty, "a simulation needs a device and a user")
        self.seed = seed
        self.configuration = configuration
        var random = SeededRandom(seed: seed)
        let pageSize = configuration.maxChangesPerPage ?? [2, 3, 5, 400][Int.random(in: 0..<4, using: &random)]
        let names = (0..<configuration.deviceCount).map { Self.deviceName($0) }
        let participantOf =
            Array(repeating: nil, count: configuration.devices)
            + configuration.participants.flatMap { Array(repeating: Optional($0), count: $0.devices) }
        let trace = SimulationTrace()
        self.trace = trace
        let network = try SimulatedNetwork(
            server: SyncServer.Configuration(
                directory: directory.appendingPathComponent("server", isDirectory: true), durability: .fast,
                maxChangesPerPage: pageSize),
            seed: random.next(), rates: configuration.faults, devices: names, trace: trace)
        self.network = network
        var setup = ["seed \(seed): server page size \(pageSize)"]
        var recordNames: [UserID: String] = [:]
        for participant in configuration.participants {
            try network.currentServer.registerUser(participant.user, emailAddress: participant.emailAddress)
            recordNames[participant.user] = try network.currentServer.userRecordID(for: participant.user).recordName
        }
        ownerName = try network.currentServer.userRecordID(for: configuration.users[0]).recordName
        var crowd: [String] = []
        if configuration.participantLimit, !configuration.participants.isEmpty {
            for number in 0..<Self.crowdSize {
                let user = UserID("crowd\(number)")
                try network.currentServer.registerUser(user, emailAddress: "\(user.rawValue)@example.com")
                crowd.append("\(user.rawValue)@example.com")
            }
        }
        self.crowd = crowd
        if !configuration.participants.isEmpty {
            network.owners.withLock { [ownerName] in $0[ownerName] = configuration.users[0] }
        }
        self.recordNames = recordNames
        self.participantOf = participantOf
        var devices: [TestDevice] = []
        var accounts: [SimulatedAccount<UserID>] = []
        for (name, participant) in zip(names, participantOf) {
            let limit: Int? = Bool.random(using: &random) ? nil : Int.random(in: 1...4, using: &random)
            let account = SimulatedAccount<UserID>(
                signedIn: participant?.user ?? configuration.users[0], scope: participant == nil ? .private : .shared
            ) { user, scope in
                SimulatedLink(network: network, device: name, user: user, scope: scope)
            }
            let seed = random.next()
            devices.append(
                try TestDevice(
                    name, database: account, directory: directory.appendingPathComponent(name, isDirectory: true),
                    policy: Self.devicePolicy(configuration)
                ) { engine in
                    engine.randomSeed = seed
                    engine.fetchResultsLimit = limit
                })
            accounts.append(account)
            let role = participant.map { "\($0.user.rawValue)'s shared database (\($0.permission)), " } ?? ""
            setup.append("\(name): \(role)fetch limit \(limit.map(String.init) ?? "none")")
        }
        self.devices = devices
        self.accounts = accounts
        self.random = random
        report = Report(seed: seed)
        busy = names.map { _ in nil }
        zoneIDs = (0..<configuration.zones).map { RecordZone.ID(zoneName: "Z\($0)") }
        recordIDs = zoneIDs.flatMap { zone in
            (0..<configuration.notesPerZone).map { Record.ID(recordName: "n\($0)", zoneID: zone) }
        }
        trace.add(setup.joined(separator: "; "))
    }

    /// The server instance running now (a restart replaces it).
    public var server: SyncServer { network.currentServer }

    /// Writes a note on device `index` outside the seeded operations, as its user would.
    public func write(_ id: Record.ID, _ title: String, on index: Int) throws {
        try devices[index].write(id, title)
        log("\(devices[index].name) writes \(Self.name(id)) = \(title) (by hand)")
    }

    static func deviceName(_ index: Int) -> String {
        index < 26 ? String(UnicodeScalar(UInt8(65 + index))) : "D\(index)"
    }

    /// Runs the operations, settles, and checks.
    ///
    /// - Returns: what the run did.
    /// - Throws: ``SimulationFailure`` naming the seed, what failed and the trace's last lines;
    ///   what a device log throws.
    @discardableResult
    public func run() async throws -> Report {
        try await runOperations()
        try await settle()
        let findings = try await check()
        guard findings.isEmpty else { throw failure(findings) }
        return finalReport()
    }

    /// The report so far, with each device's notes now.
    public func finalReport() -> Report {
        var report = report
        report.fates = network.fateCounts
        report.savesAcknowledged = network.history.withLock { $0.savesAcknowledged }
        for device in devices { report.edits += device.tally }
        report.sharing.accepted = acceptances.count
        let acknowledged = network.history.withLock { $0.acknowledged }
        report.sharing.participantChangesAcknowledged = configuration.participants.reduce(0) {
            $0 + (acknowledged[$1.user] ?? 0)
        }
        report.trace = trace.all
        report.finalNotes = devices.map { Self.describe($0.notes) }
        return report
    }

    /// A failure naming the seed, the findings, how to rerun the seed and the trace's end.
    public func failure(_ findings: [String]) -> SimulationFailure {
        SimulationFailure(
            seed: seed, findings: findings,
            rerun: configuration.rerunCommand.replacingOccurrences(of: "{seed}", with: String(seed)), trace: trace.all)
    }

    // MARK: Operations

    private func next(_ count: Int) -> Int { Int.random(in: 0..<count, using: &random) }
    private func pick<T>(_ items: [T]) -> T { items[next(items.count)] }
    private func log(_ line: String) { trace.add("#\(step) \(line)") }

    /// Runs the seeded operations, `devices × operationsPerDevice` of them (every device, the
    /// participants' included).
    public func runOperations() async throws {
        for _ in 0..<(devices.count * configuration.operationsPerDevice) {
            step += 1
            report.operations += 1
            try await randomStep()
        }
    }

    private func randomStep() async throws {
        let index = next(devices.count)
        if busy[index] != nil {
            // The device waits for the network; its user still edits.
            if next(3) == 0 { return await release(index) }
            return next(4) == 0 ? try deleteNote(index) : try write(index)
        }
        if let participant = participantOf[index] { return try await participantStep(index, participant) }
        if !configuration.participants.isEmpty, next(100) < 12 { return try shareStep(index) }
        switch next(100) {
        case 0..<30: try write(index)
        case 30..<37: try deleteNote(index)
        case 37..<40: try createZone(index)
        case 40..<42: try deleteZone(index)
        case 42..<62: await sync(index, sending: true)
        case 62..<82: await sync(index, sending: false)
        case 82..<88:
            await releaseHeldOrFetch(index)
        case 88..<91: try restartEngine(index)
        case 91..<93: try restartServer()
        case 93..<95: switchAccount(index)
        default: await sendThenFetch(index)
        }
    }

    private func write(_ index: Int) throws {
        let device = devices[index]
        if participantOf[index] != nil { return try writeShared(index) }
        let id = pick(recordIDs)
        let title = "\(device.name).\(step)"
        guard let zone = try ensureZone(device, id.zoneID) else {
            return log("\(device.name) does not write into \(id.zoneID.zoneName): its deletion is pending")
        }
        try device.write(id, title)
        log("\(device.name) writes \(Self.name(id)) = \(title)\(zone)")
    }

    /// Queues a save of the zone if the device does not know it; `nil` if its deletion is
    /// pending (the user does not write into a zone being deleted).
    private func ensureZone(_ device: TestDevice, _ zoneID: RecordZone.ID) throws -> String? {
        let state = try device.engine.deviceLog.snapshotState()
        if state.pendingDatabaseChanges.contains(.deleteZone(zoneID)) { return nil }
        if state.knownZoneIDs.contains(zoneID) || state.pendingDatabaseChanges.contains(where: { $0.zoneID == zoneID })
        {
            return ""
        }
        try device.createZone(zoneID)
        return " (+ save zone)"
    }

    /// Lets the first held request go on, or fetches on `index` when none is held.
    private func releaseHeldOrFetch(_ index: Int) async {
        if let held = busy.indices.first(where: { busy[$0] != nil }) {
            await release(held)
        } else {
            await sync(index, sending: false)
        }
    }

    /// Sends on `index`, then fetches unless the send is held.
    private func sendThenFetch(_ index: Int) async {
        await sync(index, sending: true)
        if busy[index] == nil { await sync(index, sending: false) }
    }

    private func deleteNote(_ index: Int) throws {
        let device = devices[index]
        guard let id = device.noteID(pickedBy: pick) else { return try write(index) }
        try device.delete(id)
        log("\(device.name) deletes \(Self.name(id))")
    }

    private func createZone(_ index: Int) throws {
        let device = devices[index]
        let zoneID = pick(zoneIDs)
        guard !(try device.engine.state.pendingDatabaseChanges.contains(.deleteZone(zoneID))) else {
            return log("\(device.name) does not create \(zoneID.zoneName): its deletion is pending")
        }
        try device.createZone(zoneID)
        log("\(device.name) creates \(zoneID.zoneName)")
    }

    private func deleteZone(_ index: Int) throws {
        let device = devices[index]
        let zoneID = pick(zoneIDs)
        try device.deleteZone(zoneID)
        log("\(device.name) deletes zone \(zoneID.zoneName)")
    }

    /// Sends (or fetches) on one device; one time in five in the scope of one zone only.
    private func sync(_ index: Int, sending: Bool) async {
        let engine = devices[index].engine
        let zone = next(5) == 0 ? [sharedSpelling(pick(zoneIDs), on: index)] : nil
        if sending {
            let options = zone.map { SyncEngine.SendChangesOptions(scope: .zoneIDs($0)) } ?? .init()
            report.sends += 1
            await perform(index, "sends \(options.scope)") { try await engine.sendChanges(options) }
        } else {
            let options = zone.map { SyncEngine.FetchChangesOptions(scope: .zoneIDs($0)) } ?? .init()
            report.fetches += 1
            await perform(index, "fetches \(options.scope)") { try await engine.fetchChanges(options) }
        }
    }

    private func restartEngine(_ index: Int) throws {
        try devices[index].startEngine()
        report.engineRestarts += 1
        log("\(devices[index].name)'s app quits and launches again")
    }

    private func restartServer() throws {
        try network.restartServer()
        report.serverRestarts += 1
        log("the server restarts")
    }

    private func switchAccount(_ index: Int) {
        let device = devices[index]
        let users = configuration.users
        guard users.count > 1, let current = accounts[index].currentUser, let position = users.firstIndex(of: current)
        else {
            return log("\(device.name) keeps its account")
        }
        let user = users[(position + 1) % users.count]
        accounts[index].switch(to: user)
        report.accountSwitches += 1
        log("\(device.name) switches to \(user)'s account")
    }

    // MARK: Sharing

    /// A zone as device `index` names it: the owner's ID on the owner's devices, the ID with the
    /// owner's name on a participant's.
    private func sharedSpelling(_ zoneID: RecordZone.ID, on index: Int) -> RecordZone.ID {
        participantOf[index] == nil ? zoneID : participantsSpelling(zoneID)
    }

    /// An owner's zone as its participants name it: with the owner's name.
    private func participantsSpelling(_ zoneID: RecordZone.ID) -> RecordZone.ID {
        RecordZone.ID(zoneName: zoneID.zoneName, ownerName: ownerName)
    }

    /// What an owner's device does with shares: shares a zone or its hierarchy with a
    /// participant (or invites one more), removes a participant, stops sharing, and with the
    /// configuration's switches changes a participant's permission, opens or closes a share's
    /// link, invites more users than a share may hold, or moves a note.
    private func shareStep(_ index: Int) throws {
        let device = devices[index]
        let shares = device.shares.values.sorted { $0.recordID.description < $1.recordID.description }
        var steps: [(weight: Int, step: ShareStep)] = [(60, .share), (20, .removeParticipant), (20, .deleteShare)]
        if configuration.permissionChanges { steps.append((15, .changePermission)) }
        if configuration.linkSharing { steps.append((12, .toggleLink)) }
        if configuration.participantLimit { steps.append((3, .inviteCrowd)) }
        if configuration.hierarchyShares, configuration.movesRecordsBetweenHierarchies { steps.append((15, .move)) }
        var roll = next(steps.reduce(0) { $0 + $1.weight })
        let chosen = steps.first {
            roll -= $0.weight
            return roll < 0
        }!.step
        switch chosen {
        case .share:
            try share(index)
        case .removeParticipant:
            let candidates = shares.filter { $0.participants.contains { $0.role != .owner } }
            guard !candidates.isEmpty else { return log("\(device.name) has no participant to remove") }
            var share = pick(candidates)
            let removed = pick(share.participants.filter { $0.role != .owner })
            share.removeParticipant(removed.userIdentity)
            try device.saveShare(share)
            report.sharing.participantsRemoved += 1
            log("\(device.name) removes \(participantName(removed.userIdentity)) from \(Self.describe(share))")
        case .deleteShare:
            guard !shares.isEmpty else { return log("\(device.name) has no share to delete") }
            let share = pick(shares)
            try device.deleteShare(share.recordID)
            report.sharing.sharesDeleted += 1
            log("\(device.name) stops sharing \(Self.describe(share))")
        case .changePermission:
            // Read-write participants of the configuration only: a read-only one stays so.
            let changeable = Set(
                configuration.participants.filter { $0.permission == .readWrite }.compactMap { recordNames[$0.user] })
            let candidates = shares.filter { share in
                share.participants.contains { $0.userIdentity.userRecordName.map(changeable.contains) ?? false }
            }
            guard !candidates.isEmpty else { return log("\(device.name) has no permission to change") }
            var share = pick(candidates)
            var participants = share.participants
            let positions = participants.indices.filter {
                participants[$0].userIdentity.userRecordName.map(changeable.contains) ?? false
            }
            let position = pick(positions)
            let permission: Share.Participant.Permission =
                participants[position].permission == .readWrite ? .readOnly : .readWrite
            participants[position].permission = permission
            share.participants = participants
            try device.saveShare(share)
            report.sharing.permissionsChanged += 1
            log(
                "\(device.name) makes \(participantName(participants[position].userIdentity)) \(permission) in \(Self.describe(share))"
            )
        case .toggleLink:
            guard !shares.isEmpty else { return log("\(device.name) has no share to open or close") }
            // One time in two an open share, if any: links close as often as they open.
            let open = shares.filter { $0.publicPermission != .none }
            var share = pick(!open.isEmpty && next(2) == 0 ? open : shares)
            let opening = share.publicPermission == .none
            // Read-only links only: a read-only participant who accepts one stays read-only.
            share.publicPermission = opening ? .readOnly : .none
            try device.saveShare(share)
            if opening { report.sharing.linksOpened += 1 } else { report.sharing.linksClosed += 1 }
            log("\(device.name) \(opening ? "opens" : "closes") the link of \(Self.describe(share))")
        case .inviteCrowd:
            guard !shares.isEmpty else { return log("\(device.name) has no share to invite everyone to") }
            var share = pick(shares)
            for address in crowd {
                share.addParticipant(Share.Participant(emailAddress: address, permission: .readOnly))
            }
            try device.saveShare(share)
            report.sharing.crowdInvitations += 1
            log("\(device.name) invites \(crowd.count) more users to \(Self.describe(share)), over the limit")
        case .move:
            try move(index)
        }
    }

    /// What an owner's device does with shares, in ``shareStep(_:)``.
    private enum ShareStep {
        case share, removeParticipant, deleteShare, changePermission, toggleLink, inviteCrowd, move
    }

    /// The owner's device `index` shares a zone with a participant, or invites them to the share
    /// it knows in that zone: a new share is zone-wide, or with ``Configuration/hierarchyShares``
    /// one time in two the hierarchy of the zone's `n0` (once the server has `n0`).
    private func share(_ index: Int) throws {
        let device = devices[index]
        let zoneID = pick(zoneIDs)
        let participant = pick(configuration.participants)
        guard let zone = try ensureZone(device, zoneID) else {
            return log("\(device.name) does not share \(zoneID.zoneName): its deletion is pending")
        }
        let root = Record.ID(recordName: Self.rootName, zoneID: zoneID)
        var share: Share
        if let known = device.shares.values.sorted(by: { $0.recordID.description < $1.recordID.description })
            .first(where: { $0.zoneID == zoneID })
        {
            share = known
        } else if configuration.hierarchyShares, next(2) == 0, device.notes[root] != nil,
            ((try? device.engine.deviceLog.lastKnownServerRecord(for: root)) ?? nil) != nil
        {
            share = Share(rootRecordID: root, shareID: Self.hierarchyShareID(root))
            report.sharing.hierarchySharesSaved += 1
        } else {
            share = Share(recordZoneID: zoneID)
        }
        share.addParticipant(
            Share.Participant(emailAddress: participant.emailAddress, permission: participant.permission))
        try device.saveShare(share)
        report.sharing.sharesSaved += 1
        log(
            "\(device.name) shares \(Self.describe(share)) with \(participant.user.rawValue) (\(participant.permission))\(zone)"
        )
    }

    /// The owner's device `index` moves `n1`, `n2` or `n3` of a zone into `n0`'s hierarchy, or
    /// out of it (``Configuration/movesRecordsBetweenHierarchies``).
    private func move(_ index: Int) throws {
        let device = devices[index]
        let id = Record.ID(recordName: "n\(1 + next(max(1, configuration.notesPerZone - 1)))", zoneID: pick(zoneIDs))
        guard let zone = try ensureZone(device, id.zoneID) else {
            return log("\(device.name) does not move \(Self.name(id)): the deletion of its zone is pending")
        }
        let inside = Self.parent(of: id, device.fields(id) ?? [:]) != nil
        let title = "\(device.name).\(step)"
        try device.edit(id, ["title": title, Self.folderKey: inside ? "" : Self.rootName])
        report.sharing.notesMoved += 1
        log(
            "\(device.name) moves \(Self.name(id)) = \(title) \(inside ? "out of" : "into") its zone's hierarchy\(zone)"
        )
    }

    /// A share for the trace: `Z0` for a zone-wide share, `Z0/n0` for a hierarchy's.
    static func describe(_ share: Share) -> String {
        "\(share.zoneID.zoneName)\(share.rootRecordID.map { "/" + $0.recordName } ?? "")"
    }

    /// The participant an identity names, for the trace.
    private func participantName(_ identity: UserIdentity) -> String {
        let participant = configuration.participants.first { participant in
            identity.userRecordName.map { $0 == recordNames[participant.user] }
                ?? (identity.emailAddress?.lowercased() == participant.emailAddress)
        }
        return participant.map(\.user.rawValue) ?? "\(identity)"
    }

    /// What a participant's device does, when not waiting for the network.
    private func participantStep(_ index: Int, _ participant: SharingParticipant) async throws {
        switch next(100) {
        case 0..<25:
            // With no shared zone yet, the user looks for a share to accept instead.
            if try device(index, knowsZones: true) { try write(index) } else { await accept(index, participant) }
        case 25..<30: try deleteNote(index)
        case 30..<40: await accept(index, participant)
        case 40..<43: try leave(index)
        case 43..<63: await sync(index, sending: true)
        case 63..<83: await sync(index, sending: false)
        case 83..<88:
            await releaseHeldOrFetch(index)
        case 88..<91: try restartEngine(index)
        case 91..<93: try restartServer()
        default: await sendThenFetch(index)
        }
    }

    /// Whether device `index`'s engine knows any zone.
    private func device(_ index: Int, knowsZones: Bool) throws -> Bool {
        try !devices[index].engine.deviceLog.snapshotState().knownZoneIDs.isEmpty == knowsZones
    }

    /// A participant writes a note in one of the shared zones their device knows.
    private func writeShared(_ index: Int) throws {
        let device = devices[index]
        let zones = try device.engine.deviceLog.snapshotState().knownZoneIDs.sorted { $0.description < $1.description }
        guard !zones.isEmpty else { return log("\(device.name) has no shared zone to write in") }
        let id = Record.ID(recordName: "n\(next(configuration.notesPerZone))", zoneID: pick(zones))
        let title = "\(device.name).\(step)"
        try device.write(id, title)
        log("\(device.name) writes \(Self.name(id)) = \(title)")
    }

    /// A participant's device accepts a share whose URL an owner's device knows: usually one
    /// that, as that device last saw it, invites them (pending), sometimes any (which the server
    /// may refuse); with no invitation, it mostly fetches instead.
    private func accept(_ index: Int, _ participant: SharingParticipant) async {
        let device = devices[index]
        var seen = Set<URL>()
        var invitations: [(share: Share, url: URL)] = []
        for (owner, candidate) in zip(devices, participantOf) where candidate == nil {
            for share in owner.shares.values.sorted(by: { $0.recordID.description < $1.recordID.description }) {
                if let url = share.url, seen.insert(url).inserted { invitations.append((share, url)) }
            }
        }
        guard !invitations.isEmpty else { return log("\(device.name) knows no share to accept") }
        // Invitations, and shares open to anyone with the link that the user has not joined.
        let invited = invitations.filter { invitation in
            let listed = invitation.share.participants.first {
                $0.userIdentity.userRecordName == recordNames[participant.user]
            }
            return !refusedInvitations.contains(Self.invitation(invitation.share, participant))
                && (listed?.acceptanceStatus == .pending
                    || (listed == nil && invitation.share.publicPermission != .none))
        }
        if invited.isEmpty, next(4) != 0 {
            log("\(device.name) has no invitation to accept")
            return await sync(index, sending: false)
        }
        let (share, url) = !invited.isEmpty && next(5) != 0 ? pick(invited) : pick(invitations)
        let link = SimulatedLink(network: network, device: device.name, user: participant.user, scope: .shared)
        let acceptances = acceptances
        report.sharing.acceptsTried += 1
        let outcome = await perform(index, "accepts the share of \(share.zoneID.zoneName)") {
            let metadata = try await link.fetchShareMetadata(url: url)
            let response = try await link.acceptShares([metadata])
            if case .failure(let error)? = response.results[url] { throw error }
            acceptances.add()
        }
        // The participant does not try this version of the invitation again.
        if outcome == SyncError.Code.unknownItem.name { refusedInvitations.insert(Self.invitation(share, participant)) }
    }

    /// An invitation as a participant saw it: the share's URL and version (a new version may
    /// invite them again).
    private static func invitation(_ share: Share, _ participant: SharingParticipant) -> String {
        "\(participant.user.rawValue) \(share.url?.absoluteString ?? "") \(share.record.recordChangeTag ?? "")"
    }

    /// A participant's device leaves a share it has fetched (deletes it from the shared database).
    private func leave(_ index: Int) throws {
        let device = devices[index]
        let shares = device.shares.values.sorted { $0.recordID.description < $1.recordID.description }
        guard !shares.isEmpty else { return log("\(device.name) has no share to leave") }
        let share = pick(shares)
        try device.deleteShare(share.recordID)
        report.sharing.left += 1
        log("\(device.name) leaves the share of \(share.zoneID.zoneName)")
    }

    // MARK: Driving engine operations

    /// Starts one engine operation of device `index` and waits until it finishes or the
    /// network holds one of its requests.
    @discardableResult
    private func perform(
        _ index: Int, _ what: String, _ body: @escaping @Sendable () async throws -> Void
    ) async -> String? {
        let device = devices[index]
        guard let channel = network.channels[device.name] else { return nil }
        log("\(device.name) \(what)")
        Task {
            do {
                try await body()
                channel.send(.finished("ok"))
            } catch {
                channel.send(.finished(Simulation.outcome(of: error)))
            }
        }
        return await wait(index, what)
    }

    /// The operation's outcome, or `nil` if the network holds one of its requests.
    @discardableResult
    private func wait(_ index: Int, _ what: String) async -> String? {
        let device = devices[index]
        guard let channel = network.channels[device.name] else { return nil }
        switch await channel.next() {
        case .parked:
            busy[index] = what
            trace.add("  \(device.name) waits for the network")
            return nil
        case .finished(let outcome):
            busy[index] = nil
            trace.add("  \(device.name) \(what): \(outcome)")
            if outcome.contains(SyncError.Code.tooManyParticipants.name) {
                report.sharing.participantLimitRefusals += 1
            }
            return outcome
        }
    }

    /// Lets device `index`'s held request reach the server, and waits as for a new operation.
    private func release(_ index: Int) async {
        let device = devices[index]
        guard let what = busy[index], network.parkedDevices.contains(device.name) else { return }
        log("the network lets \(device.name)'s request go")
        _ = network.release(device.name)
        await wait(index, what)
    }

    /// The error's code with its item errors' codes, sorted.
    static func outcome(of error: any Error) -> String {
        guard let error = error as? SyncError else { return "\(error)" }
        guard !error.partialErrors.isEmpty else { return error.code.name }
        let items = error.partialErrors.map { "\($0.key): \($0.value.code.name)" }.sorted()
        return "\(error.code.name) [\(items.joined(separator: ", "))]"
    }

    // MARK: Settling

    /// Fixes the network, lets held requests through, then has every device send and fetch
    /// until a round in which nothing was sent or fetched and nothing failed.
    ///
    /// - Throws: ``SimulationFailure`` if the devices do not settle within
    ///   `maxSettleRounds` rounds.
    public func settle() async throws {
        step += 1
        network.setFaults(false)
        log("the network is fixed; every device syncs until nothing changes")
        for index in devices.indices where busy[index] != nil { await release(index) }
        for round in 1...configuration.maxSettleRounds {
            var quiet = true
            for (index, device) in devices.enumerated() {
                let before = Self.activity(of: device)
                let sent = await perform(index, "sends") { try await device.engine.sendChanges() }
                let fetched = await perform(index, "fetches") { try await device.engine.fetchChanges() }
                if Self.activity(of: device) != before || sent != "ok" || fetched != "ok" { quiet = false }
            }
            if quiet {
                report.settleRounds = round
                return
            }
        }
        throw failure(["the devices did not settle in \(configuration.maxSettleRounds) rounds of sends and fetches"])
    }

    // MARK: Checks

    /// What is wrong at the end, as sentences naming devices, records and users; empty if
    /// nothing is.
    public func check() async throws -> [String] {
        var findings: [String] = []
        var serverNotes: [UserID: [Record.ID: String]] = [:]
        let server = network.currentServer
        for user in configuration.users {
            let actual = try await Self.notes(in: server.database(for: user, device: "observer"))
            serverNotes[user] = actual
            let expected = network.history.withLock { $0.expectedNotes(of: user) }
            if actual != expected {
                findings.append(
                    "the server's notes of \(user) are not what it acknowledged: "
                        + Self.difference(actual, expected, "server", "acknowledged"))
            }
        }
        let (sharedNotes, ownerShares) = try await checkSharing(&findings, serverNotes: serverNotes)
        for (index, device) in devices.enumerated() {
            guard let user = accounts[index].currentUser else { continue }
            let notes = device.notes
            let expected = participantOf[index] == nil ? serverNotes[user] : sharedNotes[user]
            if let expected, notes != expected {
                findings.append(
                    "device \(device.name) (\(user)) did not converge: "
                        + Self.difference(notes, expected, "device", "server"))
            }
            if participantOf[index] == nil, !configuration.participants.isEmpty {
                func lines(_ shares: [Record.ID: Share]) -> Set<String> {
                    Set(
                        shares.values.map { share in
                            "\(Self.describe(share)) (link \(share.publicPermission)): "
                                + share.participants.map {
                                    "\($0.userIdentity) \($0.permission) \($0.acceptanceStatus)"
                                }
                                .joined(separator: ", ")
                        })
                }
                let (local, remote) = (lines(device.shares), lines(ownerShares))
                if local != remote {
                    findings.append(
                        "device \(device.name) (\(user))'s shares differ from the server's: only on the device: "
                            + "\(local.subtracting(remote).sorted()); only on the server: \(remote.subtracting(local).sorted())"
                    )
                }
            }
            let state = try device.engine.deviceLog.snapshotState()
            if !state.pendingRecordZoneChanges.isEmpty || !state.pendingDatabaseChanges.isEmpty {
                findings.append(
                    "device \(device.name) still has changes pending: \(state.pendingRecordZoneChanges + []) "
                        + "\(state.pendingDatabaseChanges)")
            }
            let lost = device.unacknowledgedEdits
            if !lost.isEmpty {
                findings.append(
                    "device \(device.name) lost edits, neither acknowledged nor given up, with nothing pending: "
                        + Self.describe(lost.mapValues { $0["title"] ?? "" }).joined(separator: ", "))
            }
            if let mismatch = try device.engine.deviceLog.log.verifyProjections() {
                findings.append("device \(device.name)'s index differs from its rebuild: \(mismatch)")
            }
        }
        for user in configuration.users where serverNotes[user].map({ !$0.isEmpty }) ?? false {
            if let mismatch = try server.admin.log(of: user).verifyProjections() {
                findings.append("the server's index of \(user) differs from its rebuild: \(mismatch)")
            }
        }
        for participant in configuration.participants {
            if let mismatch = try server.admin.log(of: participant.user, scope: .shared).verifyProjections() {
                findings.append(
                    "the server's index of \(participant.user)'s shared database differs from its rebuild: \(mismatch)")
            }
        }
        return findings
    }

    /// The checks of sharing: each participant's shared database holds exactly the owner's
    /// notes that the shares listing them as accepted share (a zone-wide share, every note of
    /// its zone; a hierarchy share, its root and the notes whose parents lead to it, as the
    /// owner's database has them now), and no read-only participant's change reached the
    /// server. Returns each participant's shared notes, and the owner's shares.
    ///
    /// A note moved out of a shared hierarchy is gone from the participants' databases, and one
    /// moved in is there (``Configuration/movesRecordsBetweenHierarchies``).
    private func checkSharing(
        _ findings: inout [String], serverNotes: [UserID: [Record.ID: String]]
    ) async throws -> (notes: [UserID: [Record.ID: String]], shares: [Record.ID: Share]) {
        guard !configuration.participants.isEmpty else { return ([:], [:]) }
        let server = network.currentServer
        let owner = configuration.users[0]
        let contents = try await Self.contents(of: server.database(for: owner, device: "observer"))
        let shares = contents.shares
        let ownerNotes = serverNotes[owner] ?? [:]
        let acknowledged = network.history.withLock { $0.acknowledged }
        var sharedNotes: [UserID: [Record.ID: String]] = [:]
        for participant in configuration.participants {
            let actual = try await Self.notes(
                in: server.database(for: participant.user, scope: .shared, device: "observer"))
            sharedNotes[participant.user] = actual
            let accepted = shares.values.filter { share in
                share.participants.contains {
                    $0.userIdentity.userRecordName == recordNames[participant.user] && $0.acceptanceStatus == .accepted
                }
            }
            var expected: [Record.ID: String] = [:]
            for share in accepted {
                for (id, title) in ownerNotes where id.zoneID == share.zoneID {
                    guard share.rootRecordID.map({ Self.reaches(id, $0, contents.parents) }) ?? true else { continue }
                    expected[Record.ID(recordName: id.recordName, zoneID: participantsSpelling(id.zoneID))] = title
                }
            }
            if actual != expected {
                findings.append(
                    "\(participant.user)'s shared database is not the owner's notes shared with them "
                        + "(\(accepted.map(Self.describe).sorted())): "
                        + Self.difference(actual, expected, "shared database", "owner's"))
            }
            guard participant.permission == .readOnly else { continue }
            if let count = acknowledged[participant.user], count > 0 {
                findings.append(
                    "the server acknowledged \(count) changes of \(participant.user), a read-only participant")
            }
            let names = Set(zip(devices, participantOf).filter { $0.1 == participant }.map { $0.0.name + "." })
            let written = ownerNotes.filter { note in names.contains { note.value.hasPrefix($0) } }
            if !written.isEmpty {
                findings.append(
                    "the owner's notes hold edits of \(participant.user), a read-only participant: "
                        + Self.describe(written).joined(separator: ", "))
            }
        }
        return (sharedNotes, shares)
    }

    /// Whether `id` is `root`, or its parents lead to `root`.
    static func reaches(_ id: Record.ID, _ root: Record.ID, _ parents: [Record.ID: Record.ID]) -> Bool {
        var current = id
        var seen: Set<Record.ID> = []
        while current != root {
            guard seen.insert(current).inserted, let parent = parents[current] else { return false }
            current = parent
        }
        return true
    }

    /// Every note of a database (each record's `title`), read from the start of each zone;
    /// shares are not notes.
    public static func notes(in database: some CloudDatabase) async throws -> [Record.ID: String] {
        try await contents(of: database).notes
    }

    /// Every note (each record's `title`), every share and each note's parent of a database,
    /// read from the start of each zone.
    public static func contents(
        of database: some CloudDatabase
    ) async throws -> (notes: [Record.ID: String], shares: [Record.ID: Share], parents: [Record.ID: Record.ID]) {
        var notes: [Record.ID: String] = [:]
        var shares: [Record.ID: Share] = [:]
        var parents: [Record.ID: Record.ID] = [:]
        let zones = try await database.fetchZones(FetchZonesRequest()).results.keys
            .filter { $0 != .default }.sorted { $0.description < $1.description }
        for zoneID in zones {
            var token: ZoneChangeToken?
            while true {
                let page = try await database.fetchZoneChanges(FetchZoneChangesRequest(zoneID: zoneID, since: token))
                for modification in page.modifications {
                    let record = modification.record
                    if record.recordType == Share.recordType {
                        shares[record.recordID] = try Share(record: record)
                    } else {
                        notes[record.recordID] = Self.title(of: record)
                        parents[record.recordID] = record.parent?.recordID
                    }
                }
                for deletion in page.deletions {
                    notes[deletion.recordID] = nil
                    shares[deletion.recordID] = nil
                    parents[deletion.recordID] = nil
                }
                token = page.changeToken
                if !page.moreComing { break }
            }
        }
        return (notes, shares, parents)
    }

    static func name(_ id: Record.ID) -> String { "\(id.zoneID.zoneName)/\(id.recordName)" }

    /// How the simulation's devices behave (the notes app of Apple's sample, deterministic): the
    /// larger title wins a conflict; fetched changes never overwrite an edit not yet acknowledged
    /// nor bring back a note whose deletion is pending; a zone deleted under an edit is created
    /// again; an account change drops every note and edit of the previous account.
    static let devicePolicy = TestDevice.Policy(
        merge: TestDevice.Policy.mergingTitles { local, server in max(local, server) },
        keepsUnacknowledgedEdits: true, recreatesDeletedZones: true, accountChanges: .dropNotes)

    /// ``devicePolicy``, with ``Configuration/hierarchyShares`` saving each note with its parent
    /// (``parent(of:_:)``).
    static func devicePolicy(_ configuration: Configuration) -> TestDevice.Policy {
        var policy = devicePolicy
        if configuration.hierarchyShares { policy.parent = { id, fields in parent(of: id, fields) } }
        return policy
    }

    /// How many users ``Configuration/participantLimit`` registers: with the owner, one more
    /// than a share may hold.
    static let crowdSize = 100

    /// The note that roots each zone's hierarchy.
    static let rootName = "n0"

    /// The parent a note is saved with: the note its `folder` field names (none when empty),
    /// else `n0` for `n1` and `n2`, none for the others.
    static func parent(of id: Record.ID, _ fields: TestDevice.Fields) -> Record.ID? {
        if let folder = fields[folderKey] {
            return folder.isEmpty ? nil : Record.ID(recordName: folder, zoneID: id.zoneID)
        }
        return ["n1", "n2"].contains(id.recordName) ? Record.ID(recordName: rootName, zoneID: id.zoneID) : nil
    }

    /// The note field naming a note's parent once it has been moved.
    static let folderKey = "folder"

    /// The ID of the hierarchy share rooted at `root`: one per root, the same on every device.
    static func hierarchyShareID(_ root: Record.ID) -> Record.ID {
        Record.ID(recordName: "share-\(root.recordName)", zoneID: root.zoneID)
    }

    /// Whether a record name is a share's: zone-wide or of a hierarchy.
    static func isShareName(_ name: String) -> Bool {
        name == Share.zoneWideShareRecordName || name.hasPrefix("share-")
    }

    /// How many sent or fetched events a device has had, to tell a busy sync round from a quiet one.
    private static func activity(of device: TestDevice) -> Int {
        device.events.count { event in
            switch event {
            case .fetchedDatabaseChanges, .fetchedRecordZoneChanges, .sentDatabaseChanges, .sentRecordZoneChanges: true
            default: false
            }
        }
    }

    /// A note's title: the record's `title` string, or empty.
    static func title(of record: Record) -> String {
        if case .string(let title)? = record["title"] { title } else { "" }
    }

    static func describe(_ notes: [Record.ID: String]) -> [String] {
        notes.map { "\(name($0.key)) = \($0.value)" }.sorted()
    }

    private static func difference(
        _ a: [Record.ID: String], _ b: [Record.ID: String], _ aName: String, _ bName: String
    ) -> String {
        let aLines = Set(describe(a))
        let bLines = Set(describe(b))
        return
            "only on the \(aName): \(aLines.subtracting(bLines).sorted()); only \(bName): \(bLines.subtracting(aLines).sorted())"
    }
}

/// A count the simulation's engine operations add to from their tasks.
private final class Tally: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

/// A simulation that ended wrong: the seed, what was wrong, and how to run the seed again.
public struct SimulationFailure: Error, CustomStringConvertible {
    public let seed: UInt64
    /// What the checks found.
    public let findings: [String]
    /// The command that runs this seed alone.
    public let rerun: String
    /// Every line of the run's trace.
    public let trace: [String]

    public var description: String { describe(lines: 40) }

    /// The description with every line of the trace.
    public var fullDescription: String { describe(lines: trace.count) }

    private func describe(lines: Int) -> String {
        let tail = trace.suffix(lines)
        return """
            simulation seed \(seed) failed:
              \(findings.joined(separator: "\n  "))
            rerun: \(rerun)
            trace (last \(tail.count) of \(trace.count) lines):
              \(tail.joined(separator: "\n  "))
            """
    }
}
