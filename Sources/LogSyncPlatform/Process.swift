/// Calls whose spelling differs between C libraries.
package enum Platform {
    /// How many files this process may have open (`RLIMIT_NOFILE`, its soft limit), or `nil`
    /// when it cannot be read.
    package static func openFileLimit() -> Int? {
        var limit = rlimit()
        #if canImport(Glibc)
            let status = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        #else
            let status = getrlimit(RLIMIT_NOFILE, &limit)
        #endif
        return status == 0 ? Int(clamping: limit.rlim_cur) : nil
    }

    /// `write(2)`, under a name no `write` method shadows.
    package static func write(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.write(descriptor, bytes, count)
        #elseif canImport(Musl)
            Musl.write(descriptor, bytes, count)
        #else
            Darwin.write(descriptor, bytes, count)
        #endif
    }

    /// Initializes `lock` as a readers–writer lock that prefers writers where the C library
    /// lets one choose (glibc); elsewhere with the default attributes.
    package static func initializeWriterPreferringLock(_ lock: UnsafeMutablePointer<pthread_rwlock_t>) {
        #if canImport(Glibc)
            var attributes = pthread_rwlockattr_t()
            pthread_rwlockattr_init(&attributes)
            pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
            pthread_rwlock_init(lock, &attributes)
            pthread_rwlockattr_destroy(&attributes)
        #else
            pthread_rwlock_init(lock, nil)
        #endif
    }
}

/// Timed waits on a condition variable measured on the monotonic clock, so a change of the
/// wall clock cannot stretch them: glibc and musl take the clock as an attribute and an
/// absolute deadline; Apple's platforms wait for a relative time.
package enum TimedCondition {
    /// Initializes `condition` for ``wait(_:_:until:)``.
    package static func initialize(_ condition: UnsafeMutablePointer<pthread_cond_t>) {
        #if canImport(Darwin)
            pthread_cond_init(condition, nil)
        #else
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(condition, &attributes)
            pthread_condattr_destroy(&attributes)
        #endif
    }

    /// A moment on the monotonic clock, in nanoseconds.
    package struct Deadline: Sendable {
        let nanoseconds: UInt64

        /// `nanoseconds` from now.
        package init(after nanoseconds: UInt64) {
            self.nanoseconds = TimedCondition.now() + nanoseconds
        }
    }

    /// Waits on `condition` (with `mutex` held) until it is signalled or `deadline` passes.
    /// Returns `false` once the deadline has passed; `true` when woken before it (a caller
    /// checks its own predicate, as after any condition wait).
    package static func wait(
        _ condition: UnsafeMutablePointer<pthread_cond_t>, _ mutex: UnsafeMutablePointer<pthread_mutex_t>,
        until deadline: Deadline
    ) -> Bool {
        #if canImport(Darwin)
            let now = now()
            guard now < deadline.nanoseconds else { return false }
            let left = deadline.nanoseconds - now
            var relative = timespec(tv_sec: Int(left / 1_000_000_000), tv_nsec: Int(left % 1_000_000_000))
            return pthread_cond_timedwait_relative_np(condition, mutex, &relative) != ETIMEDOUT
        #else
            var absolute = timespec(
                tv_sec: Int(deadline.nanoseconds / 1_000_000_000), tv_nsec: Int(deadline.nanoseconds % 1_000_000_000))
            return pthread_cond_timedwait(condition, mutex, &absolute) != ETIMEDOUT
        #endif
    }

    /// The monotonic clock, in nanoseconds.
    static func now() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
