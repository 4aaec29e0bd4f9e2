import SodiumBridge

/// The clean decrypted chunks an open file keeps for reads, least recently used first out:
/// lookups, uses, insertions and evictions in constant time (a database keeps hundreds of
/// chunks and reads one per page miss; a scan for the oldest on every miss cost more than
/// the copy it served). The buffers are secure memory; the owner wipes what it takes out.
struct ChunkReadCache {
    private struct Entry {
        let buffer: SecureBytes
        var older: UInt64?
        var newer: UInt64?
    }

    private var entries: [UInt64: Entry] = [:]
    private var oldest: UInt64?
    private var newest: UInt64?

    var count: Int { entries.count }
    /// The indices of the kept chunks (a copy: safe to remove while going through them).
    var indices: [UInt64] { Array(entries.keys) }

    /// Chunk `index`'s plaintext, if kept (without counting it as a use).
    subscript(index: UInt64) -> SecureBytes? { entries[index]?.buffer }

    /// Counts a use of chunk `index`: it becomes the last to be evicted.
    mutating func touch(_ index: UInt64) {
        guard newest != index, entries[index] != nil else { return }
        unlink(index)
        append(index)
    }

    /// Keeps `buffer` as chunk `index` (which must not be kept already), the most recently used.
    mutating func insert(_ index: UInt64, _ buffer: SecureBytes) {
        precondition(entries[index] == nil, "a chunk kept twice")
        entries[index] = Entry(buffer: buffer)
        append(index)
    }

    /// Removes chunk `index` and returns its buffer (still holding the plaintext).
    mutating func remove(_ index: UInt64) -> SecureBytes? {
        guard entries[index] != nil else { return nil }
        unlink(index)
        return entries.removeValue(forKey: index)?.buffer
    }

    /// Removes the least recently used chunk and returns its buffer.
    mutating func removeOldest() -> SecureBytes? {
        guard let oldest else { return nil }
        return remove(oldest)
    }

    private mutating func append(_ index: UInt64) {
        entries[index]!.older = newest
        entries[index]!.newer = nil
        if let newest { entries[newest]!.newer = index } else { oldest = index }
        newest = index
    }

    private mutating func unlink(_ index: UInt64) {
        let entry = entries[index]!
        if let older = entry.older { entries[older]!.newer = entry.newer } else { oldest = entry.newer }
        if let newer = entry.newer { entries[newer]!.older = entry.older } else { newest = entry.older }
    }
}
