/// What `stat` says of a file, with the same fields on every platform: Linux calls the
/// modification time `st_mtim`, Apple's platforms `st_mtimespec`.
package struct FileStatus: Hashable, Sendable {
    /// The device holding the file.
    package let device: UInt64
    /// The file's inode: a file renamed into place is another file.
    package let inode: UInt64
    /// The size in bytes.
    package let size: Int64
    /// Whether it is a regular file (not a directory, a device or a pipe).
    package let isRegularFile: Bool
    /// The last modification of its content, in seconds and nanoseconds since 1970.
    package let modified: Time
    /// The last change of its content or its status (name, links, mode).
    package let changed: Time

    /// A time to the nanosecond.
    package struct Time: Hashable, Sendable, Comparable {
        package let seconds: Int
        package let nanoseconds: Int

        /// Seconds since 1970, as a fraction.
        package var secondsSince1970: Double { Double(seconds) + Double(nanoseconds) / 1e9 }

        package static func < (lhs: Time, rhs: Time) -> Bool {
            (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
        }

        init(_ time: timespec) {
            seconds = Int(time.tv_sec)
            nanoseconds = Int(time.tv_nsec)
        }
    }

    /// The status of the file at `path` (links followed), or `nil` when there is none or it
    /// cannot be looked at.
    package init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    /// The status of the open file `descriptor`, or `nil` when `fstat` fails.
    package init?(descriptor: Int32) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        self.init(status)
    }

    private init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        isRegularFile = (status.st_mode & S_IFMT) == S_IFREG
        #if canImport(Darwin)
            modified = Time(status.st_mtimespec)
            changed = Time(status.st_ctimespec)
        #else
            modified = Time(status.st_mtim)
            changed = Time(status.st_ctim)
        #endif
    }
}
