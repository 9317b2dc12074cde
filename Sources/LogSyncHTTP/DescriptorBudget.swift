import Foundation
import LogSyncPlatform
import SyncModel
import Synchronization

/// How many push channels this process may hold open: its descriptor limit (`ulimit -n`) less a
/// reserve, shared by every ``HTTPSyncClient`` of the process.
///
/// A process must never run out of descriptors: on Linux, Swift's thread pool (libdispatch)
/// opens `/proc/<thread>/stat` every second while work waits and traps (SIGILL) when it cannot.
/// So a channel beyond the budget is not opened: it fails as a connection that could not be
/// made (`networkFailure`, saying so) and retries after its reconnection wait, as for a server
/// it cannot reach. The reserve is an eighth of the limit, at least 32, for the app's files,
/// its requests' connections and the runtime.
final class DescriptorBudget: Sendable {
    static let process = DescriptorBudget(limit: Platform.openFileLimit())

    let channels: Int
    private let open = Mutex(0)

    init(limit: Int?) {
        guard let limit else {
            channels = .max
            return
        }
        channels = max(1, limit - max(32, limit / 8))
    }

    /// Takes a channel's place, or returns the error of a channel beyond the budget.
    func take() -> SyncError? {
        let taken = open.withLock { open -> Bool in
            guard open < channels else { return false }
            open += 1
            return true
        }
        guard !taken else { return nil }
        return SyncError(
            .networkFailure,
            "push channel not opened: this process holds \(channels) push channels, as many as its descriptor "
                + "limit (`ulimit -n`) allows with a reserve kept free; raise the limit")
    }

    /// Gives a place back.
    func give() {
        open.withLock { $0 -= 1 }
    }
}
