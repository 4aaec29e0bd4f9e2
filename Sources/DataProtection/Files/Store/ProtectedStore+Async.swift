import Foundation

/// Whole-file reads and writes for async code: each runs on a thread of its own, off Swift's
/// cooperative pool (a large file's encryption and its `fsync` block a thread for as long as
/// they take), and behaves exactly as its synchronous namesake. In an async context these are
/// the ones called (with `await`).
extension ProtectedStore {
    /// Writes `data` to the file at `path`, as ``write(_:to:protection:options:)-9mrrg`` does, off the cooperative pool.
    public func write(
        _ data: Data, to path: String, protection: ProtectionChoice = .inherited, options: Data.WritingOptions = []
    ) async throws(DataProtectionError) {
        try await BlockingCall.run { () throws(DataProtectionError) in
            try self.write(data, to: path, protection: protection, options: options)
        }
    }

    /// The whole content of the file at `path`, as ``contents(atPath:)`` reads it, off the cooperative pool.
    public func contents(atPath path: String) async throws(DataProtectionError) -> Data {
        try await BlockingCall.run { () throws(DataProtectionError) in try self.contents(atPath: path) }
    }
}
