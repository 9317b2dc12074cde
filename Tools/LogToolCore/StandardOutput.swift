import LogSyncPlatform

/// Buffered output to a file descriptor (standard output by default): text is collected and
/// written with `write(2)` in blocks of `capacity` bytes, so a dump of millions of entries costs
/// a few thousand system calls. Call `flush()` before writing anything to another stream and
/// before exiting.
///
/// After a failed write (a closed pipe with SIGPIPE ignored, a full disk) further output is
/// dropped and `flush()` throws the failure.
package struct StandardOutput: TextOutputStream {
    package let fileDescriptor: Int32
    package let capacity: Int
    private var buffer: [UInt8] = []
    private var failure: LogToolError?

    package init(fileDescriptor: Int32 = 1, capacity: Int = 64 << 10) {
        self.fileDescriptor = fileDescriptor
        self.capacity = capacity
        buffer.reserveCapacity(capacity)
    }

    package mutating func write(_ string: String) {
        guard failure == nil else { return }
        buffer.append(contentsOf: string.utf8)
        if buffer.count >= capacity { writeBuffer() }
    }

    /// Writes what is buffered.
    ///
    /// - Throws: `LogToolError` if this or an earlier write failed.
    package mutating func flush() throws(LogToolError) {
        if failure == nil && !buffer.isEmpty { writeBuffer() }
        if let failure { throw failure }
    }

    private mutating func writeBuffer() {
        let descriptor = fileDescriptor
        failure = buffer.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let written = Platform.write(descriptor, bytes.baseAddress! + done, bytes.count - done)
                if written < 0 {
                    if errno == EINTR { continue }
                    return LogToolError(
                        "cannot write to file descriptor \(descriptor): \(String(cString: strerror(errno)))")
                }
                done += written
            }
            return nil
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes `line` to standard error at once (unbuffered).
    package static func writeToStandardError(_ line: String) {
        var output = StandardOutput(fileDescriptor: 2)
        output.write(line)
        try? output.flush()
    }
}
