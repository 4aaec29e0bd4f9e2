import Foundation
import SodiumBridge
import Synchronization
import SystemPackage
import Testing
@testable import DataProtection

/// Concurrency stress: threads read and write `complete` and `completeUnlessOpen`
/// handles while another thread locks and unlocks the device thousands of times on
/// the virtual clock.
///
/// The oracle is a phase counter the toggler advances around every transition (it starts
/// at 3, unlocked): `4k+4` just before the `lock` of cycle `k`, `4k+5` once its grace
/// period has passed on the clock (the class A key is discarded), `4k+6` just before
/// `unlock`, `4k+7` once `unlock` returned. Each operation reads the counter before and
/// after itself; one that began and ended inside a single locked phase (`≡ 1 mod 4`) must
/// have failed with `protectedDataUnavailable` for a `complete` handle, one inside an
/// unlocked phase (`≡ 3 mod 4`) must have succeeded. `completeUnlessOpen` handles must
/// always work. Every file has one writer, which keeps a model of its contents: each
/// successful read must match it, and after the run each file must hold exactly what the
/// acknowledged writes made it (no acknowledged write lost, no failed write applied). A
/// run that does not end within its bound is reported as a deadlock.
///
/// `DP_STRESS_TOGGLES` sets the number of lock/unlock cycles (default 300, a few seconds;
/// the long run: `DP_STRESS_TOGGLES=5000`).
@Suite("Lock/unlock stress")
struct LockStressTests {
    final class Shared: Sendable {
        let phase = Atomic<Int>(3)
        let stop = Atomic<Bool>(false)
        let completed = Atomic<Int>(0)
        let tally = Locked(Tally())
    }

    struct Tally {
        var operations = 0
        var insideLocked = 0
        var insideUnlocked = 0
        var refusedAsExpected = 0
        var violations: [String] = []

        mutating func violation(_ text: String) {
            if violations.count < 20 { violations.append(text) }
        }
    }

    /// One worker: random reads and writes on its own handle, checked against a model.
    static func work(handle: ProtectedFileHandle, complete: Bool, seed: UInt64, shared: Shared) -> [UInt8] {
        var model: [UInt8] = []
        var random = seed
        func next() -> Int {
            random &+= 0x9E37_79B9_7F4A_7C15
            var z = random
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) >> 1)
        }
        var local = Tally()
        var counter: UInt8 = 0
        var seenPhase = -1, inPhase = 0
        while !shared.stop.load(ordering: .sequentiallyConsistent) {
            // A few operations per phase, then wait for the next one: the toggler needs the CPU too.
            let current = shared.phase.load(ordering: .sequentiallyConsistent)
            if current != seenPhase { (seenPhase, inPhase) = (current, 0) }
            if inPhase >= 4 {
                usleep(20)
                continue
            }
            inPhase += 1
            let offset = next() % 40_000
            let count = 1 + next() % 3000
            let isWrite = next() % 10 < 6
            counter &+= 1
            let bytes = [UInt8](repeating: counter, count: count)
            let before = shared.phase.load(ordering: .sequentiallyConsistent)
            let outcome: Result<Data?, DataProtectionError>
            do throws(DataProtectionError) {
                if isWrite {
                    try handle.write(contentsOf: bytes, atOffset: UInt64(offset))
                    outcome = .success(nil)
                } else {
                    outcome = .success(try handle.read(atOffset: UInt64(offset), upToCount: count))
                }
            } catch {
                outcome = .failure(error)
            }
            let after = shared.phase.load(ordering: .sequentiallyConsistent)
            shared.completed.add(1, ordering: .sequentiallyConsistent)
            local.operations += 1
            let what = "\(complete ? "complete" : "completeUnlessOpen") \(isWrite ? "write" : "read") at \(offset)+\(count), phase \(before)…\(after)"
            switch outcome {
            case .success(let read):
                if isWrite {
                    if model.count < offset + count { model += [UInt8](repeating: 0, count: offset + count - model.count) }
                    model.replaceSubrange(offset..<offset + count, with: bytes)
                } else if let read {
                    let expected = offset < model.count ? Array(model[offset..<min(model.count, offset + count)]) : []
                    if [UInt8](read) != expected { local.violation("\(what): read does not match the acknowledged writes") }
                }
                if complete && before == after && before % 4 == 1 {
                    local.violation("\(what): succeeded after the class key was discarded")
                }
            case .failure(let error):
                if !complete || error.code != .protectedDataUnavailable {
                    local.violation("\(what): \(error.code.rawValue): \(error.message)")
                } else if before == after && before % 4 == 3 {
                    local.violation("\(what): refused while unlocked")
                } else if before == after && before % 4 == 1 {
                    local.refusedAsExpected += 1
                }
            }
            if before == after && before % 4 == 1 { local.insideLocked += 1 }
            if before == after && before % 4 == 3 { local.insideUnlocked += 1 }
        }
        shared.tally.withLock { tally in
            tally.operations += local.operations
            tally.insideLocked += local.insideLocked
            tally.insideUnlocked += local.insideUnlocked
            tally.refusedAsExpected += local.refusedAsExpected
            for violation in local.violations { tally.violation(violation) }
        }
        return model
    }

    /// Lets the workers complete a few operations in the current phase (bounded wait).
    static func letWorkersRun(_ shared: Shared) {
        let target = shared.completed.load(ordering: .sequentiallyConsistent) + 3
        let deadline = ContinuousClock.now + .milliseconds(5)
        while shared.completed.load(ordering: .sequentiallyConsistent) < target && ContinuousClock.now < deadline {
            sched_yield()
        }
    }

    @Test("no complete read or write succeeds after its class key is discarded; no acknowledged write is lost; no deadlock")
    func stress() throws {
        let toggles = ProcessInfo.processInfo.environment["DP_STRESS_TOGGLES"].flatMap { Int($0) } ?? 300
        try withScratchDirectory { root in
            let clock = VirtualClock()
            let device = try Device(directory: FilePath(root.appendingPathComponent("device").path), clock: clock,
                                    configuration: .testing(grace: .seconds(10)), fileSystem: UnsyncedFileSystem())
            let store = try ProtectedStore(directory: root.appendingPathComponent("files"), device: device)
            try store.device.unlock()
            let shared = Shared()
            let workers: [(path: String, complete: Bool)] = (0..<4).map { ("a\($0)", true) } + (0..<3).map { ("b\($0)", false) }
            let handles = try workers.map { worker in
                try store.openFile(atPath: worker.path, create: true,
                                   protection: worker.complete ? .complete : .completeUnlessOpen)
            }
            let models = Locked<[Int: [UInt8]]>([:])
            let group = DispatchGroup()
            for (index, worker) in workers.enumerated() {
                group.enter()
                let handle = handles[index]
                Thread.detachNewThread {
                    let model = Self.work(handle: handle, complete: worker.complete, seed: UInt64(index + 1), shared: shared)
                    models.withLock { $0[index] = model }
                    group.leave()
                }
            }

            let started = ContinuousClock.now
            var spent = (locking: Duration.zero, unlocking: Duration.zero, waiting: Duration.zero)
            for cycle in 0..<toggles {
                var mark = ContinuousClock.now
                func lap() -> Duration { defer { mark = ContinuousClock.now }; return ContinuousClock.now - mark }
                shared.phase.store(4 * cycle + 4, ordering: .sequentiallyConsistent)
                try store.device.lock()
                clock.advance(by: .seconds(11))
                spent.locking += lap()
                shared.phase.store(4 * cycle + 5, ordering: .sequentiallyConsistent)
                if cycle % 100 == 0 { #expect(!store.device.isAvailable(.complete)) }
                Self.letWorkersRun(shared)
                spent.waiting += lap()
                shared.phase.store(4 * cycle + 6, ordering: .sequentiallyConsistent)
                try store.device.unlock()
                spent.unlocking += lap()
                shared.phase.store(4 * cycle + 7, ordering: .sequentiallyConsistent)
                Self.letWorkersRun(shared)
                spent.waiting += lap()
            }
            print("lock stress: toggler time: lock+grace \(spent.locking), unlock \(spent.unlocking), waiting for workers \(spent.waiting)")
            shared.stop.store(true, ordering: .sequentiallyConsistent)
            let bound = DispatchTime.now() + .seconds(60)
            guard group.wait(timeout: bound) == .success else {
                Issue.record("deadlock: workers still running 60 s after the last toggle")
                return
            }
            let elapsed = ContinuousClock.now - started

            // The device is unlocked: every file holds exactly what its acknowledged writes made it.
            for (index, worker) in workers.enumerated() {
                try handles[index].close()
                let expected = Data(models.withLock { $0[index] } ?? [])
                let actual = try store.contents(atPath: worker.path)
                #expect(actual == expected, "\(worker.path): \(actual.count) bytes on disk, \(expected.count) acknowledged")
            }
            let tally = shared.tally.withLock { $0 }
            print("lock stress: \(toggles) lock/unlock cycles, \(tally.operations) operations by \(workers.count) threads "
                  + "in \(elapsed); \(tally.insideLocked) wholly inside a locked phase (\(tally.refusedAsExpected) complete ones refused), "
                  + "\(tally.insideUnlocked) wholly inside an unlocked phase")
            #expect(tally.violations.isEmpty, "\(tally.violations)")
            #expect(tally.refusedAsExpected > toggles / 10, "too few operations ran while locked to test anything")
            #expect(tally.insideUnlocked > toggles / 10)
        }
    }
}
