// The platform layer: the one place that knows which C library this build runs on, and the
// only module with calls that differ between them. Every other module imports LogSyncPlatform
// for POSIX (open, fstat, flock, pthread, errno, strerror) instead of choosing between Glibc,
// Musl and Darwin itself. See Docs/Architecture.md ("Platforms").

#if canImport(Glibc)
    @_exported import Glibc
#elseif canImport(Musl)
    @_exported import Musl
#elseif canImport(Darwin)
    @_exported import Darwin
#else
    #error("LogSync needs a POSIX C library: Glibc, Musl or Darwin")
#endif
