import Foundation

/// Reading another process's memory, for the tests that prove no plaintext or secret is left
/// in an agent after the lock.
package enum ProcessMemory {
    /// Copies of `needle` in the readable private memory of process `pid` (its heap, stacks and
    /// anonymous mappings; mapped files hold none of a client's data), read through /proc.
    package static func copies(of needle: String, inProcess pid: Int32) throws -> (count: Int, bytes: Int) {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let memory = open("/proc/\(pid)/mem", O_RDONLY)
        guard memory >= 0 else { throw ProcessMemoryFailure(description: "cannot open /proc/\(pid)/mem: errno \(errno)") }
        defer { close(memory) }
        let pattern = Array(needle.utf8)
        var count = 0, scanned = 0
        let window = 1 << 20
        var buffer = [UInt8](repeating: 0, count: window + pattern.count)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("r") else { continue }
            let path = fields.count == 6 ? fields[5].trimmingCharacters(in: .whitespaces) : ""
            guard path.isEmpty || path.hasPrefix("[heap") || path.hasPrefix("[stack") || path.hasPrefix("[anon") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard bounds.count == 2 else { continue }
            var position = bounds[0]
            while position < bounds[1] {
                let length = Int(min(UInt64(window + pattern.count - 1), bounds[1] - position))
                let read = buffer.withUnsafeMutableBytes { pread(memory, $0.baseAddress, length, off_t(Int64(bitPattern: position))) }
                if read < pattern.count {
                    position += UInt64(min(window, Int(bounds[1] - position)))
                    continue
                }
                buffer.withUnsafeBytes { raw in
                    pattern.withUnsafeBytes { needleBytes in
                        var from = 0
                        while from + pattern.count <= read,
                              let hit = memchr(raw.baseAddress! + from, Int32(pattern[0]), read - from - pattern.count + 1) {
                            let at = raw.baseAddress!.distance(to: UnsafeRawPointer(hit))
                            if memcmp(hit, needleBytes.baseAddress!, pattern.count) == 0,
                               at < window || UInt64(read) + position >= bounds[1] { count += 1 }
                            from = at + 1
                        }
                    }
                }
                let advance = min(window, read)
                scanned += advance
                position += UInt64(advance)
            }
        }
        return (count, scanned)
    }
}

/// `/proc/<pid>/mem` could not be read (another user's process, or `ptrace` refused).
package struct ProcessMemoryFailure: Error, CustomStringConvertible {
    package let description: String
}
