import CSodium
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Test-only: searches the whole readable memory of this process for secrets
/// recorded by ``SecretRecorder`` (Linux: `/proc/self/maps` and `/proc/self/mem`).
///
/// Every readable mapping is read through `/proc/self/mem` (a page that cannot be
/// read is skipped, never faulted on) in 1 MiB windows that overlap by the longest
/// secret, and searched with `memmem`. `[vvar]`, `[vvar_vclock]` and `[vsyscall]` are
/// skipped. The secrets are unmasked into secure memory for the search; that buffer and
/// the read window are `sodium_malloc`ed and excluded from the search (they are the
/// scanner's own copies, wiped when it returns).
package enum MemoryScanner {
    /// A recorded secret found in memory.
    package struct Finding: Sendable, CustomStringConvertible {
        package let label: String
        package let address: UInt
        /// The mapping it lies in: its permissions and path (`[heap]`, a file, or empty for anonymous memory).
        package let mapping: String
        package var description: String { "\(label) at 0x\(String(address, radix: 16)) in \(mapping)" }
    }

    /// What a scan covered and found.
    package struct Report: Sendable {
        package var bytesScanned = 0
        package var regionsScanned = 0
        /// Bytes in readable mappings that could not be read (or were the scanner's own buffers).
        package var bytesSkipped = 0
        package var findings: [Finding] = []
    }

    private struct Region {
        let start: UInt
        let end: UInt
        let description: String
    }

    /// Scans for `secrets`. Throws when `/proc/self/maps` or `/proc/self/mem` cannot be opened (not Linux).
    package static func scan(for secrets: [SecretRecorder.Secret]) throws -> Report {
        // Read to the end: /proc files report a size of 0, and a single read returns one page.
        guard let mapsHandle = FileHandle(forReadingAtPath: "/proc/self/maps") else {
            throw CocoaError(.fileReadNoPermission, userInfo: [NSFilePathErrorKey: "/proc/self/maps"])
        }
        defer { try? mapsHandle.close() }
        var mapsData = Data()
        while let piece = try mapsHandle.read(upToCount: 1 << 16), !piece.isEmpty { mapsData += piece }
        let maps = String(decoding: mapsData, as: UTF8.self)
        let descriptor = open("/proc/self/mem", O_RDONLY)
        guard descriptor >= 0 else {
            throw CocoaError(.fileReadNoPermission, userInfo: [NSFilePathErrorKey: "/proc/self/mem"])
        }
        defer { close(descriptor) }

        let secrets = secrets.filter { $0.count > 0 }
        let longest = secrets.map(\.count).max() ?? 1
        let needles = SecureBytes(count: secrets.reduce(0) { $0 + $1.count })
        var offsets: [Int] = []
        needles.withUnsafeMutableBytes { out in
            var offset = 0
            for secret in secrets {
                offsets.append(offset)
                secret.unmask(into: UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + secret.count]))
                offset += secret.count
            }
        }
        let windowSize = 1 << 20
        let window = SecureBytes(count: windowSize + longest)
        let excluded: [Range<UInt>] = [needles, window].map { buffer in
            buffer.withUnsafeBytes { raw in
                let start = UInt(bitPattern: raw.baseAddress)
                return start..<start + UInt(max(raw.count, 1))
            }
        }

        var report = Report()
        for region in regions(in: maps) {
            report.regionsScanned += 1
            var position = region.start
            while position < region.end {
                let length = Int(min(UInt(windowSize + longest - 1), region.end - position))
                let read = window.withUnsafeMutableBytes { buffer in
                    pread(descriptor, buffer.baseAddress, length, off_t(Int64(position)))
                }
                if read < longest {
                    // Unreadable (a guard page, a mapping that just went away): skip one window.
                    let step = min(UInt(windowSize), region.end - position)
                    report.bytesSkipped += Int(step)
                    position += step
                    continue
                }
                let span = position..<position + UInt(read)
                window.withUnsafeMutableBytes { buffer in
                    for range in excluded where range.overlaps(span) {
                        let from = Int(max(range.lowerBound, span.lowerBound) - position)
                        let to = Int(min(range.upperBound, span.upperBound) - position)
                        sodium_memzero(buffer.baseAddress! + from, to - from)
                        report.bytesSkipped += to - from
                    }
                }
                needles.withUnsafeBytes { needleBytes in
                    window.withUnsafeBytes { buffer in
                        for (index, secret) in secrets.enumerated() {
                            let needle = needleBytes.baseAddress! + offsets[index]
                            var from = 0
                            while from + secret.count <= read,
                                  let hit = dp_memmem(buffer.baseAddress! + from, read - from, needle, secret.count) {
                                let at = buffer.baseAddress!.distance(to: hit)
                                // Matches starting in the overlap are found again by the next window.
                                if at < windowSize || UInt(read) + position >= region.end {
                                    report.findings.append(Finding(label: secret.label, address: position + UInt(at),
                                                                   mapping: region.description))
                                }
                                from = at + 1
                            }
                        }
                    }
                }
                let advance = min(UInt(windowSize), UInt(read))
                report.bytesScanned += Int(advance)
                position += advance
            }
        }
        window.wipe()
        needles.wipe()
        return report
    }

    /// The readable mappings, minus the kernel's special pages.
    private static func regions(in maps: String) -> [Region] {
        maps.split(separator: "\n").compactMap { line -> Region? in
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[1].hasPrefix("r") else { return nil }
            let path = fields.count == 6 ? fields[5].trimmingCharacters(in: .whitespaces) : ""
            guard !["[vvar]", "[vvar_vclock]", "[vsyscall]"].contains(path) else { return nil }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16),
                  end > start else { return nil }
            return Region(start: start, end: end, description: "\(fields[1]) \(path.isEmpty ? "anonymous" : path)")
        }
    }
}
