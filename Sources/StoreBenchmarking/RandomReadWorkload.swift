import DataProtection
import Foundation
import SodiumBridge
import SystemPackage

/// Reads of 4 KiB at random 4 KiB-aligned offsets (so that each lies in one
/// chunk): through a handle on a store file, and through the raw baseline
/// (`pread` of the one record, open, copy out) on the raw file of the same size.
package enum RandomReadWorkload {
    /// The read size.
    package static let readSize = 4096

    /// Random 4 KiB-aligned offsets below `size`, from `seed`.
    package static func offsets(count: Int, size: Int, seed: UInt64) -> [Int] {
        var state = seed | 1
        let slots = max(1, size / readSize)
        return (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % UInt64(slots)) * readSize
        }
    }

    /// One timing per read through `handle` (`read(atOffset:upToCount:)`).
    package static func store(_ handle: ProtectedFileHandle, offsets: [Int]) throws -> [Duration] {
        let clock = ContinuousClock()
        return try offsets.map { offset in
            let start = clock.now
            let data = try handle.read(atOffset: UInt64(offset), upToCount: readSize)
            let elapsed = clock.now - start
            precondition(data.count == readSize, "short random read")
            return elapsed
        }
    }

    /// One timing per read of the raw file written by `workload.rawWrite`.
    package static func raw(_ workload: SequentialWorkload, at url: URL, offsets: [Int]) throws -> [Duration] {
        let file = try FileDescriptor.open(FilePath(url.path), .readOnly)
        defer { try? file.close() }
        let scratch = SecureBytes(count: SequentialWorkload.chunkSize)
        let clock = ContinuousClock()
        return try offsets.map { offset in
            let start = clock.now
            let data = try workload.rawRecordRead(file, offset: offset, count: readSize, scratch: scratch)
            let elapsed = clock.now - start
            precondition(data.count == readSize, "short raw read")
            return elapsed
        }
    }
}
