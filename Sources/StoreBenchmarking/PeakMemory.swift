import Foundation

/// The process's resident memory from `/proc/self/status` (Linux), with the
/// peak reset through `/proc/self/clear_refs`, so that the peak of one phase
/// (streaming a file) can be read apart from earlier ones (Argon2id).
package enum PeakMemory {
    /// Resets the peak (`VmHWM`) to the current resident size; false where unsupported.
    @discardableResult
    package static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }

    /// The resident size now (`VmRSS`), in bytes.
    package static var resident: Int? { field("VmRSS") }

    /// The peak resident size (`VmHWM`), in bytes.
    package static var peak: Int? { field("VmHWM") }

    private static func field(_ name: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            return digits.map { $0 * 1024 }
        }
        return nil
    }
}
