/// The allocator's knobs for returning memory to the system. glibc keeps freed memory in its
/// arenas and raises its thresholds after each large block freed; these two calls undo that.
/// Elsewhere (musl, Apple's allocator, which returns memory by itself) both do nothing.
package enum Allocator {
    /// Blocks of `mmapThreshold` bytes or more are mapped on their own and unmapped when freed,
    /// and an arena keeps at most `trimThreshold` bytes free at its top, both fixed
    /// (`mallopt(M_MMAP_THRESHOLD)`, `mallopt(M_TRIM_THRESHOLD)`). Returns whether the
    /// allocator took them.
    package static func fixThresholds(mmapThreshold: Int32, trimThreshold: Int32) -> Bool {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "mallopt") else { return false }
            let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
            // <malloc.h>: M_TRIM_THRESHOLD is -1, M_MMAP_THRESHOLD -3.
            return mallopt(-3, mmapThreshold) == 1 && mallopt(-1, trimThreshold) == 1
        #else
            return false
        #endif
    }

    /// Returns the free pages inside every arena to the system (`malloc_trim(0)`).
    package static func returnFreeMemory() {
        #if canImport(Glibc)
            if let mallocTrim { _ = mallocTrim(0) }
        #endif
    }

    #if canImport(Glibc)
        /// glibc's `malloc_trim`, looked up at run time: Swift's Glibc module does not export
        /// `<malloc.h>`.
        private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
            guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        }()
    #endif
}
