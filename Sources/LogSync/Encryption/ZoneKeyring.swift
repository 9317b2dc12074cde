import Foundation
import SyncModel
import Synchronization

/// The keys an engine holds for encrypted fields (F129): its device key pair, kept in a file
/// beside the device log and made the first time a field is sealed or opened, and the zone keys
/// it opened from their wraps, in memory only (the server keeps them wrapped; a relaunch fetches
/// them again). See `Docs/Encryption.md`.
final class ZoneKeyring: Sendable {
    /// Where the device's private key is kept.
    let keyFile: URL
    private let state = Mutex(KeyState())

    private struct KeyState {
        var pair: DeviceKeyPair?
        var registered = false
        var keys: [RecordZone.ID: [UInt32: ZoneKey]] = [:]
    }

    init(keyFile: URL) {
        self.keyFile = keyFile
    }

    /// Whether this device has a key pair: it has sealed or opened encrypted fields before (in
    /// this launch or an earlier one).
    var isInUse: Bool {
        state.withLock { $0.pair != nil } || FileManager.default.fileExists(atPath: keyFile.path)
    }

    /// The device's key pair, loaded from ``keyFile`` or made and kept there.
    ///
    /// - Throws: ``SyncError`` when the file cannot be read or written, or holds no key.
    func pair() throws(SyncError) -> DeviceKeyPair {
        if let pair = state.withLock({ $0.pair }) { return pair }
        let pair = try DeviceKeyPair.loadOrCreate(at: keyFile)
        return state.withLock { state in
            if let existing = state.pair { return existing }
            state.pair = pair
            return pair
        }
    }

    /// Whether the device's public key still has to be registered in this launch.
    var needsRegistration: Bool { state.withLock { !$0.registered } }

    func markRegistered() { state.withLock { $0.registered = true } }

    /// The version `version` of the zone's key, if this device holds it.
    func key(_ zoneID: RecordZone.ID, version: UInt32) -> ZoneKey? {
        state.withLock { $0.keys[zoneID]?[version] }
    }

    /// The versions of the zone's key this device holds.
    func keys(_ zoneID: RecordZone.ID) -> [UInt32: ZoneKey] {
        state.withLock { $0.keys[zoneID] ?? [:] }
    }

    func insert(_ key: ZoneKey) {
        state.withLock { $0.keys[key.zoneID, default: [:]][key.version] = key }
    }

    /// Forgets the keys of every zone, and that the device key is registered (the account
    /// changed).
    func forgetAccount() {
        state.withLock {
            $0.keys = [:]
            $0.registered = false
        }
    }
}
