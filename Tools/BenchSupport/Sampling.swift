import Foundation
import LogSyncPlatform
import Synchronization

// What the benchmarks sample while a phase runs: peak anonymous memory, processor time, file
// sizes.

/// Samples RssAnon every 10 ms on a thread of its own and keeps the largest value (kB); given
/// a progress count, also keeps a curve: the sample taken when each further tenth of `total`
/// has been reached.
package final class PeakSampler: Sendable {
    private let state = Mutex<(peak: Int, stopped: Bool, curve: [[Int]])>((0, false, []))

    package init(total: Int = 0, progress: (@Sendable () -> Int)? = nil) {
        Thread.detachNewThread { [self] in
            var nextMark = 1
            while true {
                let anon = Memory.read().anon
                let done = progress?() ?? 0
                let stopped = state.withLock { state in
                    state.peak = max(state.peak, anon)
                    if progress != nil, total > 0, nextMark <= 10, done >= total * nextMark / 10 {
                        state.curve.append([done, anon])
                        while nextMark <= 10, done >= total * nextMark / 10 { nextMark += 1 }
                    }
                    return state.stopped
                }
                if stopped { return }
                usleep(10_000)
            }
        }
    }

    /// The curve sampled so far: [progress, RssAnon kB] pairs.
    package var curve: [[Int]] { state.withLock { $0.curve } }

    /// Stops sampling and returns the peak.
    package func stop() -> Int {
        state.withLock { state in
            state.stopped = true
            return state.peak
        }
    }
}

/// User plus system CPU time of this process, in seconds.
package func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

package func fileSize(_ url: URL) -> Int {
    (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
}
