import Foundation
import SodiumBridge

/// Runs a call that blocks its thread (Argon2id, `fsync`, reading a whole file) on a thread
/// of its own instead of one of Swift's cooperative pool, whose few threads every task of
/// the process shares: an `await` on it suspends the task, and the pool keeps running others.
package enum BlockingCall {
    private static let queue = DispatchQueue(label: "DataProtection.blocking", qos: .userInitiated, attributes: .concurrent)

    /// The result of `body`, run on a dispatch thread.
    package static func run<T: Sendable>(
        _ body: @escaping @Sendable () throws(DataProtectionError) -> T
    ) async throws(DataProtectionError) -> T {
        // The task's secret recording (key-hygiene tests) goes along with the work.
        let carrier = SecretRecorder.carrier
        let result: Result<T, DataProtectionError> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(DataProtectionError) {
                    continuation.resume(returning: .success(try SecretRecorder.carrying(carrier, body)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
