import LogStore
import SyncModel
import Testing

@testable import LogSync

/// The pure schedule value: debounce, retry-after, backoff (Docs/Engine.md, Automatic sync).
@Suite("Sync schedule")
struct SyncScheduleTests {
    typealias Schedule = SyncSchedule

    @Test("F17 F82 the first change schedules one send after the debounce; more changes add nothing")
    func debounce() {
        var schedule = Schedule()
        #expect(schedule.next == nil)
        let first = schedule.localChangesAdded(at: .seconds(10))
        #expect(first)
        for second in 10...12 {
            let again = schedule.localChangesAdded(at: .seconds(second))
            #expect(!again)
        }
        #expect(schedule.next?.work == .send)
        #expect(schedule.next?.at == .seconds(11))
        #expect(schedule.next?.cause == .localChanges)
        schedule.started(.send)
        #expect(schedule.next == nil)
        // A change made while the send runs schedules the next one.
        let next = schedule.localChangesAdded(at: .seconds(11.5))
        #expect(next)
        #expect(schedule.next?.at == .seconds(12.5))
    }

    @Test("F83 a push hint makes a fetch due at once; sends go first at equal times")
    func pushHint() {
        var schedule = Schedule(policy: .init(debounce: .zero))
        let moved = schedule.fetchNeeded(at: .seconds(5))
        let movedAgain = schedule.fetchNeeded(at: .seconds(6))  // already due
        #expect(moved && !movedAgain)
        #expect(schedule.next?.work == .fetch)
        schedule.localChangesAdded(at: .seconds(5))
        #expect(schedule.next?.work == .send)
        schedule.started(.send)
        #expect(schedule.next?.work == .fetch)
        #expect(schedule.next?.at == .seconds(5))
    }

    @Test("F84 F90 a retry-after is honoured to the second, even over newer changes")
    func retryAfter() {
        var schedule = Schedule()
        var random = SeededRandom(seed: 1)
        schedule.localChangesAdded(at: .zero)
        schedule.started(.send)
        // New changes arrive while the send runs, then it fails with a retry-after of 13 s.
        schedule.localChangesAdded(at: .seconds(1))
        let error = SyncError(.requestRateLimited, "slow down", retryAfter: .seconds(13))
        let retry = schedule.finished(.send, error: error, at: .seconds(2), random: &random)
        #expect(retry?.after == .seconds(13))
        #expect(retry?.cause == .retry(failures: 1, after: .seconds(13), serverRetryAfter: true))
        #expect(schedule.next?.at == .seconds(15))
    }

    @Test("F89 F90 transient failures without a hint back off exponentially, with seeded jitter, up to the cap")
    func backoff() {
        let policy = Schedule.Policy(initialBackoff: .seconds(2), maximumBackoff: .seconds(60), jitter: 0.2)
        var schedule = Schedule(policy: policy)
        var random = SeededRandom(seed: 42)
        var waits: [Duration] = []
        for _ in 0..<8 {
            schedule.started(.send)
            let retry = schedule.finished(.send, error: SyncError(.zoneBusy), at: .zero, random: &random)
            waits.append(retry!.after)
        }
        let bases: [Duration] = [2, 4, 8, 16, 32, 60, 60, 60].map { .seconds($0) }
        for (wait, base) in zip(waits, bases) {
            #expect(wait >= base * 0.8 && wait <= base * 1.2, "wait \(wait) for base \(base)")
        }
        #expect(waits[3] > waits[0])
        // The same seed gives the same waits.
        var again = Schedule(policy: policy)
        var sameRandom = SeededRandom(seed: 42)
        let replayed = (0..<8).map { _ in
            again.finished(.send, error: SyncError(.zoneBusy), at: .zero, random: &sameRandom)!.after
        }
        #expect(replayed == waits)
    }

    @Test("F91 a success or a non-transient failure resets the backoff and schedules nothing")
    func reset() {
        var schedule = Schedule(policy: .init(jitter: 0))
        var random = SeededRandom(seed: 3)
        schedule.finished(.fetch, error: SyncError(.networkFailure), at: .zero, random: &random)
        schedule.finished(.fetch, error: SyncError(.networkFailure), at: .zero, random: &random)
        #expect(schedule.failures[.fetch] == 2)
        schedule.started(.fetch)
        let afterSuccess = schedule.finished(.fetch, error: nil, at: .zero, random: &random)
        #expect(afterSuccess == nil)
        #expect(schedule.failures[.fetch] == nil)
        #expect(schedule.next == nil)
        let afterConflict = schedule.finished(.send, error: SyncError(.serverRecordChanged), at: .zero, random: &random)
        #expect(afterConflict == nil)
        #expect(schedule.next == nil)
        let first = schedule.finished(.fetch, error: SyncError(.serviceUnavailable), at: .zero, random: &random)
        #expect(first?.after == .seconds(2))
    }
}
