import LogSyncPlatform
import Synchronization

/// Gives the memory of large requests back to the system once none is in progress.
///
/// glibc's allocator keeps freed memory in its arenas for later allocations: after one request
/// whose body was decoded into many small objects, the process kept that memory for good. Two
/// things give it back:
///
/// - ``configureAllocator()``, once per process: blocks of 256 KiB or more (request bodies,
///   answers, the arrays of a decoded request) are mapped on their own and unmapped when freed,
///   and an arena keeps at most 1 MiB free at its top. glibc otherwise raises both thresholds
///   after each large block freed (up to 32 and 64 MiB), so that an 8 MiB body, once freed,
///   stayed in the process.
/// - After a large request: a request is *large* when its body or its answer holds
///   ``largeBytes`` or more, or its body ``largeElements`` elements or more; when the last
///   large request in progress ends, the free pages inside every arena are returned
///   (`malloc_trim(0)`).
///
/// On other platforms (Apple's allocator returns memory by itself) both do nothing: the calls
/// themselves are LogSyncPlatform's `Allocator`.
final class MemoryReturn: Sendable {
    /// A body or answer of at least this many bytes makes a request large: 512 KiB.
    static let largeBytes = 512 * 1024
    /// A body of at least this many elements makes a request large.
    static let largeElements = 10_000

    /// The large requests in progress.
    private let inProgress = Mutex(0)
    /// How many times memory was returned: for tests.
    private let trims = Atomic<Int>(0)

    var trimCount: Int { trims.load(ordering: .relaxed) }

    /// A large request has begun: memory is not returned while it lasts.
    func began() {
        inProgress.withLock { $0 += 1 }
    }

    /// A request has ended, after its body and its decoded objects were freed: `began` if
    /// ``began()`` was called for it, `large` if it turned out large (its answer, say). Returns
    /// memory when it was the last large request in progress.
    func ended(began: Bool, large: Bool) {
        guard began || large else { return }
        let last = inProgress.withLock { count -> Bool in
            if began { count -= 1 }
            return count == 0
        }
        if last {
            Self.trim()
            trims.add(1, ordering: .relaxed)
        }
    }

    /// Returns the free memory of the allocator's arenas to the system (`malloc_trim(0)` with
    /// glibc); nothing elsewhere.
    static func trim() {
        Allocator.returnFreeMemory()
    }

    /// Sets glibc's thresholds so that large blocks go back to the system when they are freed:
    /// `M_MMAP_THRESHOLD` 256 KiB and `M_TRIM_THRESHOLD` 1 MiB, fixed (`mallopt`). Once per
    /// process; later calls do nothing. Nothing elsewhere.
    static func configureAllocator() {
        _ = allocatorConfigured
    }

    private static let allocatorConfigured: Bool = Allocator.fixThresholds(
        mmapThreshold: 256 * 1024, trimThreshold: 1024 * 1024)
}
