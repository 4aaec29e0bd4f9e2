import CSQLite
import SodiumBridge

/// The shared memory of SQLite's WAL mode (`xShmMap` and friends), in process memory:
/// the wal-index never touches the disk, so it leaks nothing and needs no class key. It
/// lives while a connection to the database has it mapped and is rebuilt by SQLite from
/// the WAL (its "recovery") when the first connection maps it again. A database's memory
/// is keyed by its file's ``SQLiteStorageFile/identity``, not its path: connections
/// opened before and after a move of the database share it.
final class SQLiteSharedMemory: Sendable {
    /// The regions and locks of one database. Reached only under ``segments``' lock (hence
    /// `@unchecked Sendable`), from the table or from the ``Holding`` of a file that maps it.
    /// Its properties skip the dynamic exclusivity check: the lock already serialises them.
    fileprivate final class Segment: @unchecked Sendable {
        @exclusivity(unchecked) var regions: [Region] = []
        @exclusivity(unchecked) var users = 0
        @exclusivity(unchecked) var sharedCounts = [Int](repeating: 0, count: Int(SQLITE_SHM_NLOCK))
        @exclusivity(unchecked) var exclusiveHolders = [ObjectIdentifier?](repeating: nil, count: Int(SQLITE_SHM_NLOCK))
    }

    /// A zeroed region that never moves while mapped.
    fileprivate struct Region: @unchecked Sendable {
        let base: UnsafeMutableRawPointer
        let size: Int
    }

    /// What one open file holds of its segment's locks, and the segment while it maps it (a
    /// transaction's half a dozen `xShmLock`s then find it without hashing the file's identity).
    struct Holding {
        fileprivate var segment: Segment?
        var mapped: Bool { segment != nil }
        var shared: UInt8 = 0
        var exclusive: UInt8 = 0
    }

    private let segments = Locked<[ObjectIdentifier: Segment]>([:])

    /// `xShmMap`: the region `index` of `size` bytes, made when `extend` is set; `nil` when
    /// it does not exist and may not be made.
    func map(_ file: ObjectIdentifier, holding: inout Holding, index: Int, size: Int, extend: Bool) -> UnsafeMutableRawPointer? {
        segments.withLock { segments in
            let segment: Segment
            if let mapped = holding.segment {
                segment = mapped
            } else {
                segment = segments[file] ?? Segment()
                segments[file] = segment
                segment.users += 1
                holding.segment = segment
            }
            if index < segment.regions.count { return segment.regions[index].base }
            guard extend else { return nil }
            while segment.regions.count <= index {
                let base = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
                base.initializeMemory(as: UInt8.self, repeating: 0, count: size)
                segment.regions.append(Region(base: base, size: size))
            }
            return segment.regions[index].base
        }
    }

    /// `xShmLock`: `false` when another holder is in the way (`SQLITE_BUSY`), or when the file
    /// maps no segment (SQLite locks only after mapping).
    func lock(holding: inout Holding, holder: ObjectIdentifier, offset: Int, count: Int, flags: Int32) -> Bool {
        segments.withLock { _ in
            guard let segment = holding.segment else { return false }
            return Self.lock(segment, holding: &holding, holder: holder, slots: offset..<(offset + count), flags: flags)
        }
    }

    private static func lock(_ segment: Segment, holding: inout Holding, holder: ObjectIdentifier, slots: Range<Int>, flags: Int32) -> Bool {
        if flags & SQLITE_SHM_UNLOCK != 0 {
            for slot in slots {
                let bit = UInt8(1) << slot
                if holding.shared & bit != 0 { segment.sharedCounts[slot] -= 1; holding.shared &= ~bit }
                if holding.exclusive & bit != 0 { segment.exclusiveHolders[slot] = nil; holding.exclusive &= ~bit }
            }
            return true
        }
        if flags & SQLITE_SHM_SHARED != 0 {
            for slot in slots {
                let bit = UInt8(1) << slot
                guard holding.shared & bit == 0 else { continue }
                if let other = segment.exclusiveHolders[slot], other != holder { return false }
            }
            for slot in slots {
                let bit = UInt8(1) << slot
                guard holding.shared & bit == 0 else { continue }
                segment.sharedCounts[slot] += 1
                holding.shared |= bit
            }
            return true
        }
        for slot in slots {
            let bit = UInt8(1) << slot
            if let other = segment.exclusiveHolders[slot], other != holder { return false }
            let mine = holding.shared & bit != 0 ? 1 : 0
            if segment.sharedCounts[slot] - mine > 0 { return false }
        }
        for slot in slots {
            segment.exclusiveHolders[slot] = holder
            holding.exclusive |= UInt8(1) << slot
        }
        return true
    }

    /// `xShmBarrier`: taking and releasing the lock is a full memory barrier.
    func barrier() {
        segments.withLock { _ in }
    }

    /// `xShmUnmap`: drops the holder's locks and mapping; the last one frees the memory.
    func unmap(_ file: ObjectIdentifier, holding: inout Holding, holder: ObjectIdentifier) {
        guard holding.mapped else { return }
        _ = lock(holding: &holding, holder: holder, offset: 0, count: Int(SQLITE_SHM_NLOCK), flags: SQLITE_SHM_UNLOCK)
        segments.withLock { segments in
            guard let segment = holding.segment else { return }
            holding.segment = nil
            segment.users -= 1
            guard segment.users == 0 else { return }
            for region in segment.regions {
                region.base.initializeMemory(as: UInt8.self, repeating: 0, count: region.size)
                region.base.deallocate()
            }
            segment.regions.removeAll()
            if segments[file] === segment { segments[file] = nil }
        }
    }
}
