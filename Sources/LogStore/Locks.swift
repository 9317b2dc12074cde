import LogSyncPlatform

/// A plain mutex for synchronous critical sections (never held across `await`).
///
/// `@unchecked Sendable`: the pthread mutex is heap-allocated, never moved, and is the
/// synchronization itself.
final class PlainLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// Readers–writer lock guarding the memory map: read transactions hold it shared; resizing the
/// map (which LMDB allows only while no transaction of this process is open) holds it exclusive.
///
/// `@unchecked Sendable`: as `PlainLock`. Writers are preferred so a resize is not starved by a
/// stream of readers.
final class MapLock: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() {
        Platform.initializeWriterPreferringLock(lock)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func lockShared() { pthread_rwlock_rdlock(lock) }
    func lockExclusive() { pthread_rwlock_wrlock(lock) }
    func unlock() { pthread_rwlock_unlock(lock) }
}
