import Dispatch
import Testing
@testable import SodiumBridge

/// `Locked`: mutual exclusion, typed errors, and (under `.ci/sanitizers thread`) a lock
/// ThreadSanitizer sees: with `Synchronization.Mutex` in its place, TSan reports the
/// counter below as a data race on Linux (its futex calls are invisible to TSan).
@Suite("Locked")
struct LockedTests {
    struct Refused: Error, Equatable {}

    @Test("concurrent increments are neither lost nor reported as races")
    func concurrentIncrements() {
        let count = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<20_000 { count.withLock { $0 += 1 } }
        }
        #expect(count.withLock { $0 } == 80_000)
    }

    @Test("body's typed error passes through, and the lock is released after it")
    func typedThrows() {
        let value = Locked([1])
        #expect(throws: Refused.self) {
            try value.withLock { (values: inout [Int]) throws(Refused) in
                values.append(2)
                throw Refused()
            }
        }
        let result: Result<Int, Refused> = Result { () throws(Refused) in
            try value.withLock { (values: inout [Int]) throws(Refused) -> Int in values.count }
        }
        #expect(result == .success(2))
    }
}
