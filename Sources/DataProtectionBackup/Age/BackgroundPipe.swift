import DataProtection
import Foundation

/// A bounded hand-off between two threads, so that age's ChaCha20-Poly1305 runs on one core
/// while the store encrypts or decrypts on another (the `tar | age` pipelines it is measured
/// against run on two). At most `capacity` pieces wait; the first failure of either side
/// ends both, and is rethrown to the caller.
final class BackgroundPipe: @unchecked Sendable {
    private let condition = NSCondition()
    private var pieces: [Data] = []
    private var ended = false
    private var cancelled = false
    private var failure: DataProtectionError?
    private var threadDone = false
    private let capacity: Int

    private init(capacity: Int) { self.capacity = capacity }

    // MARK: - Writing side in the background (create)

    /// Pieces given to ``send(_:)`` are handed to `consume` on a thread of their own.
    static func consuming(capacity: Int = 8, _ consume: @escaping @Sendable (Data) throws(DataProtectionError) -> Void) -> BackgroundPipe {
        let pipe = BackgroundPipe(capacity: capacity)
        Thread.detachNewThread {
            while let piece = pipe.take() {
                do throws(DataProtectionError) { try consume(piece) } catch {
                    pipe.fail(error)
                    break
                }
            }
            pipe.markThreadDone()
        }
        return pipe
    }

    /// Queues `piece` (waiting while the queue is full); throws the consumer's failure.
    func send(_ piece: Data) throws(DataProtectionError) {
        try put(piece)
    }

    /// Waits until every piece was consumed; throws the consumer's failure.
    func finish() throws(DataProtectionError) {
        condition.lock()
        ended = true
        condition.broadcast()
        while !threadDone { condition.wait() }
        let failure = failure
        condition.unlock()
        if let failure { throw failure }
    }

    // MARK: - Reading side in the background (restore, verify)

    /// `produce` runs on a thread of its own until it returns `nil`; ``receive()`` hands its pieces out in order.
    static func producing(capacity: Int = 16, _ produce: @escaping @Sendable () throws(DataProtectionError) -> Data?) -> BackgroundPipe {
        let pipe = BackgroundPipe(capacity: capacity)
        Thread.detachNewThread {
            while true {
                do throws(DataProtectionError) {
                    guard let piece = try produce() else {
                        pipe.end()
                        break
                    }
                    try pipe.put(piece)
                } catch {
                    pipe.fail(error)
                    break
                }
            }
            pipe.markThreadDone()
        }
        return pipe
    }

    /// The next piece; `nil` at the end; throws the producer's failure.
    func receive() throws(DataProtectionError) -> Data? {
        condition.lock()
        defer { condition.unlock() }
        while pieces.isEmpty && !ended && failure == nil { condition.wait() }
        if !pieces.isEmpty {
            let piece = pieces.removeFirst()
            condition.broadcast()
            return piece
        }
        if let failure { throw failure }
        return nil
    }

    /// Stops the other thread and waits for it (it must not outlive its input or output).
    func cancel() {
        condition.lock()
        cancelled = true
        pieces.removeAll()
        condition.broadcast()
        while !threadDone { condition.wait() }
        condition.unlock()
    }

    // MARK: - Internals

    private func put(_ piece: Data) throws(DataProtectionError) {
        condition.lock()
        defer { condition.unlock() }
        while pieces.count >= capacity && failure == nil && !cancelled { condition.wait() }
        if let failure { throw failure }
        if cancelled { throw DataProtectionError(.ioFailure, "The backup was abandoned.") }
        pieces.append(piece)
        condition.broadcast()
    }

    private func take() -> Data? {
        condition.lock()
        defer { condition.unlock() }
        while pieces.isEmpty && !ended && failure == nil && !cancelled { condition.wait() }
        guard failure == nil, !cancelled, !pieces.isEmpty else { return nil }
        let piece = pieces.removeFirst()
        condition.broadcast()
        return piece
    }

    private func fail(_ error: DataProtectionError) {
        condition.lock()
        if failure == nil { failure = error }
        condition.broadcast()
        condition.unlock()
    }

    private func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    private func markThreadDone() {
        condition.lock()
        threadDone = true
        condition.broadcast()
        condition.unlock()
    }
}
